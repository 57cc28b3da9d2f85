package metrics

import (
	"bytes"
	"encoding/json"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// maxPrefix bounds what a scanner keeps of one message (or of a JSON
// body, or of a line): a response says whether it is an error, and
// which, in its first members; the rest of it (a 20 MB result) passes
// by without being kept.
const maxPrefix = 16 << 10

// answer is what a scanner learned of one JSON-RPC response.
type answer struct {
	id      string // jsonrpc.Key of its id; "" when the prefix did not hold it
	isErr   bool
	code    int
	message string
}

// scanner finds the JSON-RPC responses in what an HTTP face writes to
// one POST: the data of each event of an event stream, or a JSON body
// (one message, or a batch). It keeps only the start of each message
// (maxPrefix), so its memory is bounded whatever the body's size. The
// zero value scans a JSON body; sse is set for an event stream.
type scanner struct {
	sse      bool
	line     []byte // the current line, its start
	lineOver bool   // the current line is longer than line
	data     []byte // the current event's data, its start
	body     []byte // a JSON body, its start
	answers  []answer
}

// write scans p, the next bytes of the body.
func (s *scanner) write(p []byte) {
	if !s.sse {
		s.body = appendCapped(s.body, p)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.addLine(p)
			return
		}
		s.addLine(p[:i])
		p = p[i+1:]
		s.endLine()
	}
}

func (s *scanner) addLine(p []byte) {
	if len(s.line)+len(p) > maxPrefix {
		s.lineOver = true
	}
	s.line = appendCapped(s.line, p)
}

// endLine handles one line of an event stream: a data field's value is
// added to the event's data, an empty line ends the event.
func (s *scanner) endLine() {
	line := bytes.TrimSuffix(s.line, []byte("\r"))
	if s.lineOver {
		line = s.line // cut: its \r, if any, is further on
	}
	switch {
	case len(line) == 0:
		if len(s.data) > 0 {
			s.scanMessages(s.data)
		}
		s.data = s.data[:0]
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
		if len(s.data) > 0 {
			s.data = appendCapped(s.data, []byte("\n"))
		}
		s.data = appendCapped(s.data, v)
	}
	s.line, s.lineOver = s.line[:0], false
}

// end finishes the scan: a JSON body is read now.
func (s *scanner) end() {
	if !s.sse && len(s.body) > 0 {
		s.scanMessages(s.body)
	}
}

// scanMessages reads the responses at the start of b: one message or a
// batch of them, maybe cut short.
func (s *scanner) scanMessages(b []byte) {
	if s.decode(b) {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return
	}
	if tok == json.Delim('[') {
		for dec.More() {
			if !s.scanObject(dec, nil, true) {
				return
			}
		}
		return
	}
	s.scanObject(dec, tok, false)
}

// decode reads b when it is whole: the common case, a message or batch
// within maxPrefix, read by the proxy's own decoder at a fraction of the
// cost of the token scan that a cut prefix needs.
func (s *scanner) decode(b []byte) bool {
	msgs, _, err := jsonrpc.Decode(b)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if !m.IsResponse() {
			continue
		}
		a := answer{id: jsonrpc.Key(m.ID), isErr: m.Error != nil}
		if a.isErr {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			json.Unmarshal(m.Error, &e)
			a.code, a.message = e.Code, e.Message
		}
		s.answers = append(s.answers, a)
	}
	return true
}

// scanObject reads one message from dec (its '{' already read when first
// is set) and keeps it when it is a response. It returns false when the
// input ended inside it. Outside a batch, a result whose id came first is
// not read at all: nothing after it is needed.
func (s *scanner) scanObject(dec *json.Decoder, first json.Token, batch bool) bool {
	if first == nil {
		var err error
		if first, err = dec.Token(); err != nil {
			return false
		}
	}
	if first != json.Delim('{') {
		return skip(dec, first)
	}
	var a answer
	response := false
fields:
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		switch k {
		case "method":
			return skipRest(dec) // a request or notification
		case "id":
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				break fields
			}
			a.id = jsonrpc.Key(raw)
			continue
		case "result":
			response = true
			if !batch && a.id != "" {
				s.answers = append(s.answers, a)
				return true
			}
		case "error":
			response, a.isErr = true, true
			if readError(dec, &a) {
				continue
			}
			break fields
		}
		if !skipValue(dec) {
			break
		}
	}
	if response {
		s.answers = append(s.answers, a)
	}
	_, err := dec.Token() // the closing '}'
	return err == nil
}

// readError reads an error object's code and message into a; false when
// the object was cut short.
func readError(dec *json.Decoder, a *answer) bool {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return err == nil && skip(dec, tok)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		v, err := dec.Token()
		if err != nil {
			return false
		}
		switch {
		case k == "code":
			if n, ok := v.(json.Number); ok {
				c, _ := n.Int64()
				a.code = int(c)
			}
		case k == "message":
			a.message, _ = v.(string)
		}
		if !skip(dec, v) {
			return false
		}
	}
	_, err := dec.Token()
	return err == nil
}

// skipValue skips the next value of dec.
func skipValue(dec *json.Decoder) bool {
	tok, err := dec.Token()
	return err == nil && skip(dec, tok)
}

// skip skips the rest of a value whose first token tok was read.
func skip(dec *json.Decoder, tok json.Token) bool {
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		return skipRest(dec)
	}
	return true
}

// skipRest skips to the end of the object or array being read.
func skipRest(dec *json.Decoder) bool {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return true
}

// appendCapped appends p to b up to maxPrefix bytes in all.
func appendCapped(b, p []byte) []byte {
	if room := maxPrefix - len(b); room < len(p) {
		p = p[:max(room, 0)]
	}
	return append(b, p...)
}
