package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// IntOrString holds either an integer or a string such as "25%", as the
// Kubernetes type of the same name. The zero value is the integer 0.
type IntOrString struct {
	IsString bool
	IntVal   int32
	StrVal   string
}

// FromInt returns an IntOrString holding i.
func FromInt(i int32) IntOrString { return IntOrString{IntVal: i} }

// FromString returns an IntOrString holding s.
func FromString(s string) IntOrString { return IntOrString{IsString: true, StrVal: s} }

// String returns the value as written in a manifest.
func (v IntOrString) String() string {
	if v.IsString {
		return v.StrVal
	}
	return strconv.Itoa(int(v.IntVal))
}

// MarshalJSON encodes the value as a JSON number or string.
func (v IntOrString) MarshalJSON() ([]byte, error) {
	if v.IsString {
		return json.Marshal(v.StrVal)
	}
	return json.Marshal(v.IntVal)
}

// UnmarshalJSON accepts a JSON number or string.
func (v *IntOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = FromString(s)
		return nil
	}
	var i int32
	if err := json.Unmarshal(b, &i); err != nil {
		return fmt.Errorf("must be an integer or a percentage string: %w", err)
	}
	*v = FromInt(i)
	return nil
}

// Percent reports the percentage held by a string value such as "25%":
// decimal digits (no sign) and a "%", at most math.MaxInt32 as Kubernetes'
// int32 fields. ok is false for integers, for strings that are not
// percentages and for percentages too large for an int32, which must not
// pass for some other number.
func (v IntOrString) Percent() (pct int, ok bool) {
	digits, found := strings.CutSuffix(v.StrVal, "%")
	if !v.IsString || !found || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// Scaled resolves the value against total as Kubernetes'
// GetScaledValueFromIntOrPercent: an integer is returned as is, a
// percentage is applied to total and rounded up when roundUp is set (down
// otherwise). A string that is not a percentage Percent accepts is an
// error naming it.
func (v IntOrString) Scaled(total int, roundUp bool) (int, error) {
	if !v.IsString {
		return int(v.IntVal), nil
	}
	pct, ok := v.Percent()
	if !ok {
		return 0, fmt.Errorf("invalid value %q: must be an integer or a percentage of at most %d%%", v.StrVal, math.MaxInt32)
	}
	f := float64(pct) * float64(total) / 100
	if roundUp {
		return int(math.Ceil(f)), nil
	}
	return int(math.Floor(f)), nil
}
