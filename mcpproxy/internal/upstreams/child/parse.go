package child

import (
	"errors"
	"fmt"
	"strings"
)

// ParseCommand splits a command line on spaces, tabs and newlines,
// honouring single and double quotes (no escapes, no expansion: it is no
// shell), for --upstream-cmd. It fails on an unclosed quote or an empty
// line.
func ParseCommand(s string) (Command, error) {
	var args []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return Command{}, fmt.Errorf("unclosed quote in %q", s)
	}
	if inWord {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return Command{}, errors.New("empty command")
	}
	return Command{Path: args[0], Args: args[1:]}, nil
}
