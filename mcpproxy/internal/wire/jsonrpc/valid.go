package jsonrpc

// maxDepth is the deepest nesting Valid accepts: encoding/json's limit,
// so that a message one accepts the other accepts too.
const maxDepth = 10000

// Valid reports whether b is one JSON value (RFC 8259) with optional
// whitespace around it. Its answer is encoding/json.Valid's for every
// input (FuzzValid holds it to that): strings may hold bytes that are not
// UTF-8, and nesting deeper than 10000 is refused. It is a plain loop over
// the bytes, several times faster than encoding/json's scanner, which
// makes a function call per byte; every message the proxy relays passes
// here once.
func Valid(b []byte) bool {
	var small [64]byte
	open := small[:0] // the containers open around i: '{' or '['
	i := SkipSpace(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(open) >= maxDepth {
				return false
			}
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
				i++
				break
			}
			open = append(open, c)
			if c == '{' {
				if i = member(b, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = skipString(b, i)
		case 't':
			i = literal(b, i, "true")
		case 'f':
			i = literal(b, i, "false")
		case 'n':
			i = literal(b, i, "null")
		default:
			i = SkipNumber(b, i)
		}
		if i < 0 {
			return false
		}
		if i, open = afterValue(b, i, open); i < 0 || len(open) == 0 {
			return i == len(b)
		}
	}
}

// afterValue reads what follows a value that ended at b[i], in the
// containers open: the brackets that close them, then the comma (and,
// in an object, the next member's name and colon) before the next value.
// It returns where that value starts and the containers still open; none
// when the outermost closed, with i past it; i < 0 when the bytes are
// none of those.
func afterValue(b []byte, i int, open []byte) (int, []byte) {
	for {
		i = SkipSpace(b, i)
		if len(open) == 0 {
			return i, open
		}
		if i >= len(b) {
			return -1, open
		}
		top := open[len(open)-1]
		if b[i] == top+2 {
			open = open[:len(open)-1]
			i++
			continue
		}
		if b[i] != ',' {
			return -1, open
		}
		i = SkipSpace(b, i+1)
		if top == '{' {
			i = member(b, i)
		}
		return i, open
	}
}

// member returns where the value of the object member whose name starts
// at b[i] begins: past the name, the colon and the space around it; -1
// when there is no name and colon there.
func member(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = skipString(b, i); i < 0 {
		return -1
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
}

// skipString returns the end of the string literal at b[i] (b[i] is '"'),
// -1 when it is not one: unterminated, an unknown escape, or a control
// character. Other bytes pass, UTF-8 or not, as in encoding/json.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !hex(b[i+1]) || !hex(b[i+2]) || !hex(b[i+3]) || !hex(b[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func hex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// SkipNumber returns the end of the JSON number at b[i], -1 when there
// is none: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What follows
// it is the caller's to judge ("01" is a 0 followed by a stray 1);
// SkipNumber(b, 0) == len(b) when b is exactly one number.
func SkipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// digits returns the end of the run of decimal digits at b[i].
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// literal returns the end of lit at b[i], -1 when b does not hold it there.
func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
