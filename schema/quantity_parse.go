package schema

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// maxQuantityExponent bounds the decimal exponent of a quantity ("1e999999"
// would otherwise make big.Rat allocate without limit).
const maxQuantityExponent = 100

// quantitySuffixes maps a Kubernetes quantity suffix to its multiplier as a
// (base, exponent) pair.
var quantitySuffixes = map[string]struct{ base, exp int64 }{
	"":   {10, 0},
	"n":  {10, -9},
	"u":  {10, -6},
	"m":  {10, -3},
	"k":  {10, 3},
	"M":  {10, 6},
	"G":  {10, 9},
	"T":  {10, 12},
	"P":  {10, 15},
	"E":  {10, 18},
	"Ki": {2, 10},
	"Mi": {2, 20},
	"Gi": {2, 30},
	"Ti": {2, 40},
	"Pi": {2, 50},
	"Ei": {2, 60},
}

// ParseQuantity returns the exact value of q using the Kubernetes quantity
// grammar: an optionally signed decimal number ("1", "0.5", "1.5") followed
// by nothing, a decimal SI suffix (n u m k M G T P E), a binary suffix (Ki Mi
// Gi Ti Pi Ei) or a decimal exponent ("1e3", "5E-1"). Anything else,
// including an empty string, is an error.
func ParseQuantity(q Quantity) (*big.Rat, error) {
	s := string(q)
	num, suffix := splitQuantity(s)
	if num == "" || num == "+" || num == "-" || num == "." || strings.HasSuffix(num, "-.") || strings.HasSuffix(num, "+.") {
		return nil, fmt.Errorf("quantity %q: must be a number with an optional unit suffix", s)
	}
	value, ok := new(big.Rat).SetString(num)
	if !ok {
		return nil, fmt.Errorf("quantity %q: must be a number with an optional unit suffix", s)
	}
	base, exp, err := quantityMultiplier(s, suffix)
	if err != nil {
		return nil, err
	}
	mult := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(base), big.NewInt(abs64(exp)), nil))
	if exp < 0 {
		mult.Inv(mult)
	}
	return value.Mul(value, mult), nil
}

// splitQuantity splits s into its numeric part (sign, digits, one optional
// decimal point) and the suffix that follows.
func splitQuantity(s string) (num, suffix string) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	dot := false
	for i < len(s) {
		c := s[i]
		if c >= '0' && c <= '9' {
			i++
			continue
		}
		if c == '.' && !dot {
			dot = true
			i++
			continue
		}
		break
	}
	return s[:i], s[i:]
}

// quantityMultiplier resolves a suffix, including the exponent forms
// "e<int>" and "E<int>", to base**exp.
func quantityMultiplier(s, suffix string) (base, exp int64, err error) {
	if m, ok := quantitySuffixes[suffix]; ok {
		return m.base, m.exp, nil
	}
	if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		e, parseErr := strconv.ParseInt(suffix[1:], 10, 64)
		if errors.Is(parseErr, strconv.ErrRange) {
			return 0, 0, fmt.Errorf("quantity %q: exponent out of range", s)
		}
		if parseErr == nil {
			if e > maxQuantityExponent || e < -maxQuantityExponent {
				return 0, 0, fmt.Errorf("quantity %q: exponent out of range", s)
			}
			return 10, e, nil
		}
	}
	return 0, 0, fmt.Errorf("quantity %q: unknown unit suffix %q (want one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent e<n>)", s, suffix)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// errQuantityRange reports a quantity that does not fit an int64.
var errQuantityRange = errors.New("out of range for a 64-bit integer")

// Value returns q rounded up to the nearest integer, as Kubernetes'
// Quantity.Value does ("1.5" is 2, "100m" is 1). It fails when q does not
// parse or does not fit an int64.
func (q Quantity) Value() (int64, error) {
	return q.scaledCeil(1)
}

// MilliValue returns q multiplied by 1000 and rounded up to the nearest
// integer, as Kubernetes' Quantity.MilliValue does ("100m" is 100, "0.5" is
// 500, "1" is 1000). It fails when q does not parse or does not fit an int64.
func (q Quantity) MilliValue() (int64, error) {
	return q.scaledCeil(1000)
}

// scaledCeil returns ceil(q*scale) as an int64.
func (q Quantity) scaledCeil(scale int64) (int64, error) {
	r, err := ParseQuantity(q)
	if err != nil {
		return 0, err
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	n, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() || n.Int64() == math.MinInt64 {
		return 0, fmt.Errorf("quantity %q: %w", string(q), errQuantityRange)
	}
	return n.Int64(), nil
}
