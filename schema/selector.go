package schema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Selector is a parsed label selector string, as kubectl's -l/--selector
// takes it: every requirement must hold. The zero Selector matches
// everything.
type Selector []SelectorRequirement

// SelectorRequirement is one requirement of a Selector. Operator is one of
// LabelOpIn, LabelOpNotIn, LabelOpExists, LabelOpDoesNotExist, NodeOpGt or
// NodeOpLt; "k=v" is In [v] and "k!=v" NotIn [v].
type SelectorRequirement struct {
	Key      string
	Operator string
	Values   []string
}

// ParseSelector parses a label selector in the grammar of Kubernetes'
// labels.Parse: comma-separated requirements, each one of
//
//	key = value, key == value, key != value
//	key in (v1, v2, ...), key notin (v1, v2, ...)
//	key, !key
//	key > integer, key < integer
//
// Keys must be valid label keys and values valid label values. Errors read
// as kubectl's: "unable to parse requirement: found '(', expected: ...".
func ParseSelector(s string) (Selector, error) {
	p := &selectorParser{tokens: lexSelector(s)}
	var sel Selector
	for {
		switch tok := p.peek(); tok.kind {
		case tokEnd:
			return sel, nil
		case tokIdentifier, tokNot:
			r, err := p.requirement()
			if err != nil {
				return nil, fmt.Errorf("unable to parse requirement: %w", err)
			}
			sel = append(sel, r)
			switch tok := p.next(); tok.kind {
			case tokEnd:
				return sel, nil
			case tokComma:
				if p.peek().kind != tokIdentifier && p.peek().kind != tokNot {
					return nil, fmt.Errorf("found '%s', expected: identifier after ','", p.peek().text)
				}
			default:
				return nil, fmt.Errorf("found '%s', expected: ',' or 'end of string'", tok.text)
			}
		default:
			return nil, fmt.Errorf("found '%s', expected: !, identifier, or 'end of string'", tok.text)
		}
	}
}

// Matches reports whether labels satisfy every requirement of sel.
func (sel Selector) Matches(labels map[string]string) bool {
	for _, r := range sel {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// Matches reports whether labels satisfy r. NotIn and DoesNotExist hold
// for a missing key; Gt and Lt need the value to be an integer.
func (r SelectorRequirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case LabelOpIn:
		return ok && slices.Contains(r.Values, v)
	case LabelOpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case LabelOpExists:
		return ok
	case LabelOpDoesNotExist:
		return !ok
	case NodeOpGt, NodeOpLt:
		if !ok || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return (r.Operator == NodeOpGt && have > want) || (r.Operator == NodeOpLt && have < want)
	}
	return false
}

// Selector token kinds.
const (
	tokEnd = iota
	tokIdentifier
	tokNot
	tokComma
	tokOpenPar
	tokClosePar
	tokEquals
	tokDoubleEquals
	tokNotEquals
	tokIn
	tokNotIn
	tokGreater
	tokLess
)

type selectorToken struct {
	kind int
	text string
}

// selectorOperators are the operator tokens, longest first.
var selectorOperators = []selectorToken{
	{tokDoubleEquals, "=="}, {tokNotEquals, "!="}, {tokEquals, "="}, {tokNot, "!"},
	{tokComma, ","}, {tokOpenPar, "("}, {tokClosePar, ")"}, {tokGreater, ">"}, {tokLess, "<"},
}

// lexSelector splits s into tokens: operators, and identifiers that run
// until whitespace or an operator character; "in" and "notin" are
// keywords.
func lexSelector(s string) []selectorToken {
	var out []selectorToken
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return append(out, selectorToken{tokEnd, ""})
		}
		if tok, ok := operatorPrefix(s); ok {
			out = append(out, tok)
			s = s[len(tok.text):]
			continue
		}
		end := strings.IndexAny(s, " \t\r\n!=,()<>")
		if end < 0 {
			end = len(s)
		}
		word := s[:end]
		switch word {
		case "in":
			out = append(out, selectorToken{tokIn, word})
		case "notin":
			out = append(out, selectorToken{tokNotIn, word})
		default:
			out = append(out, selectorToken{tokIdentifier, word})
		}
		s = s[end:]
	}
}

func operatorPrefix(s string) (selectorToken, bool) {
	for _, op := range selectorOperators {
		if strings.HasPrefix(s, op.text) {
			return op, true
		}
	}
	return selectorToken{}, false
}

// selectorParser walks the tokens of one selector.
type selectorParser struct {
	tokens []selectorToken
	pos    int
}

func (p *selectorParser) peek() selectorToken { return p.tokens[p.pos] }

func (p *selectorParser) next() selectorToken {
	t := p.tokens[p.pos]
	if t.kind != tokEnd {
		p.pos++
	}
	return t
}

// requirement parses "!key", "key", or "key OP values".
func (p *selectorParser) requirement() (SelectorRequirement, error) {
	if p.peek().kind == tokNot {
		p.next()
		key, err := p.key()
		return SelectorRequirement{Key: key, Operator: LabelOpDoesNotExist}, err
	}
	key, err := p.key()
	if err != nil {
		return SelectorRequirement{}, err
	}
	op := p.peek()
	switch op.kind {
	case tokEnd, tokComma:
		return SelectorRequirement{Key: key, Operator: LabelOpExists}, nil
	case tokEquals, tokDoubleEquals, tokNotEquals, tokGreater, tokLess:
		p.next()
		return p.single(key, op)
	case tokIn, tokNotIn:
		p.next()
		values, err := p.set()
		operator := LabelOpIn
		if op.kind == tokNotIn {
			operator = LabelOpNotIn
		}
		return SelectorRequirement{Key: key, Operator: operator, Values: values}, err
	}
	return SelectorRequirement{}, fmt.Errorf("found '%s', expected: in, notin, =, ==, !=, gt, lt", op.text)
}

func (p *selectorParser) key() (string, error) {
	tok := p.next()
	if tok.kind != tokIdentifier {
		return "", fmt.Errorf("found '%s', expected: identifier", tok.text)
	}
	if problem := LabelKeyProblem(tok.text); problem != "" {
		return "", fmt.Errorf("%s", problem)
	}
	return tok.text, nil
}

// single parses the one value of =, ==, !=, > or <; the value of = and !=
// may be empty.
func (p *selectorParser) single(key string, op selectorToken) (SelectorRequirement, error) {
	value := ""
	if t := p.peek(); t.kind == tokIdentifier || t.kind == tokIn || t.kind == tokNotIn {
		value = p.next().text
	}
	r := SelectorRequirement{Key: key, Values: []string{value}}
	switch op.kind {
	case tokGreater, tokLess:
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return r, fmt.Errorf("for 'Gt', 'Lt' operators, the value must be an integer: %q", value)
		}
		r.Operator = NodeOpGt
		if op.kind == tokLess {
			r.Operator = NodeOpLt
		}
		return r, nil
	case tokNotEquals:
		r.Operator = LabelOpNotIn
	default:
		r.Operator = LabelOpIn
	}
	if problem := LabelValueProblem(value); problem != "" {
		return r, fmt.Errorf("%s", problem)
	}
	return r, nil
}

// set parses "(v1, v2, ...)".
func (p *selectorParser) set() ([]string, error) {
	if tok := p.next(); tok.kind != tokOpenPar {
		return nil, fmt.Errorf("found '%s', expected: '('", tok.text)
	}
	var values []string
	for {
		tok := p.next()
		switch tok.kind {
		case tokIdentifier, tokIn, tokNotIn:
			if problem := LabelValueProblem(tok.text); problem != "" {
				return nil, fmt.Errorf("%s", problem)
			}
			values = append(values, tok.text)
		case tokClosePar:
			if len(values) == 0 {
				return nil, fmt.Errorf("found ')', expected: identifier: a set needs at least one value")
			}
			return values, nil
		default:
			return nil, fmt.Errorf("found '%s', expected: identifier or ')'", tok.text)
		}
		switch tok := p.next(); tok.kind {
		case tokComma:
		case tokClosePar:
			return values, nil
		default:
			return nil, fmt.Errorf("found '%s', expected: ',', or ')'", tok.text)
		}
	}
}
