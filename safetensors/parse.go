package safetensors

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// metadataKey is the header entry that holds the file's metadata rather
// than a tensor.
const metadataKey = "__metadata__"

// ParseHeader parses and checks the JSON header alone (DataOffset is left
// 0): the header an object; its text valid UTF-8 with no lone surrogate
// escape (encoding/json would turn either into U+FFFD, so that two names
// could merge into one); no name twice, in the header or in any entry;
// every tensor's dtype known, its shape non-negative, its byte range as
// long as its shape says, and the ranges one after the other from 0 with
// no gap or overlap; the metadata an object of strings.
func ParseHeader(js []byte) (*Header, error) {
	if err := checkText(js); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	h := &Header{}
	err := object(d, func(name string) error { // object refuses a name twice: two tensors, or two __metadata__
		if name == metadataKey {
			m, err := metadata(d)
			if err != nil {
				return fmt.Errorf("__metadata__: %w", err)
			}
			h.Metadata = m
			return nil
		}
		t, err := tensorEntry(d, name)
		if err != nil {
			return err
		}
		h.Tensors = append(h.Tensors, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: header: text after the header's object", ErrFormat)
	}
	slices.SortFunc(h.Tensors, func(a, b Tensor) int {
		return cmp.Or(cmp.Compare(a.Begin, b.Begin), cmp.Compare(a.End, b.End), cmp.Compare(a.Name, b.Name))
	})
	var pos int64
	for _, t := range h.Tensors {
		if t.Begin != pos {
			return nil, fmt.Errorf("%w: tensor %q begins at %d, where %d was expected (a gap or an overlap)", ErrFormat, t.Name, t.Begin, pos)
		}
		pos = t.End
	}
	h.DataSize = pos
	return h, nil
}

// object reads one JSON object from d, calling entry for each key with
// d placed before the key's value (which entry must read), and refuses a
// key that comes twice.
func object(d *json.Decoder, entry func(key string) error) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%s where an object was expected", describe(tok))
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%s where a key was expected", describe(tok))
		}
		if seen[key] {
			return fmt.Errorf("key %q twice in one object", key)
		}
		seen[key] = true
		if err := entry(key); err != nil {
			return err
		}
	}
	_, err = d.Token() // the closing '}': More said there is no other key
	return err
}

func metadata(d *json.Decoder) (map[string]string, error) {
	m := map[string]string{}
	err := object(d, func(key string) error {
		s, err := stringValue(d)
		if err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		m[key] = s
		return nil
	})
	return m, err
}

func tensorEntry(d *json.Decoder, name string) (Tensor, error) {
	var dtype string
	var shape, offsets []int64
	var have struct{ dtype, shape, offsets bool }
	err := object(d, func(key string) error {
		var err error
		switch key {
		case "dtype":
			have.dtype = true
			dtype, err = stringValue(d)
		case "shape":
			have.shape = true
			shape, err = intArray(d)
		case "data_offsets":
			have.offsets = true
			offsets, err = intArray(d)
		default: // other keys are allowed, as by the reference implementation
			var skip json.RawMessage
			err = d.Decode(&skip)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	if !have.dtype || !have.shape || !have.offsets {
		return Tensor{}, fmt.Errorf("tensor %q: an entry needs dtype, shape and data_offsets", name)
	}
	if len(offsets) != 2 {
		return Tensor{}, fmt.Errorf("tensor %q: data_offsets %v: want [begin, end]", name, offsets)
	}
	return tensorOf(name, dtype, shape, offsets[0], offsets[1])
}

// tensorOf checks one tensor: its name, dtype, shape, and a byte range
// [begin, end) as long as shape times the dtype's size. The error does
// not wrap ErrFormat: the caller adds it.
func tensorOf(name, dtype string, shape []int64, begin, end int64) (Tensor, error) {
	bad := func(format string, args ...any) (Tensor, error) {
		return Tensor{}, fmt.Errorf("tensor %q: %s", name, fmt.Sprintf(format, args...))
	}
	if name == metadataKey {
		return bad("the name of the metadata entry")
	}
	if !utf8.ValidString(name) {
		return bad("the name is not valid UTF-8")
	}
	size, ok := DTypeSize(dtype)
	if !ok {
		return bad("unknown dtype %q", dtype)
	}
	if begin < 0 || end < begin {
		return bad("data_offsets [%d, %d]", begin, end)
	}
	elems := int64(1)
	for _, d := range shape {
		if d < 0 || d > 0 && elems > math.MaxInt64/d {
			return bad("shape %v", shape)
		}
		elems *= d
	}
	if elems > math.MaxInt64/int64(size) || elems*int64(size) != end-begin {
		return bad("shape %v of %s needs %d elements of %d bytes, data_offsets [%d, %d] hold %d bytes", shape, dtype, elems, size, begin, end, end-begin)
	}
	if shape == nil {
		shape = []int64{}
	}
	return Tensor{Name: name, DType: dtype, Shape: shape, Begin: begin, End: end}, nil
}

func stringValue(d *json.Decoder) (string, error) {
	tok, err := d.Token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%s where a string was expected", describe(tok))
	}
	return s, nil
}

func intArray(d *json.Decoder) ([]int64, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, fmt.Errorf("%s where an array was expected", describe(tok))
	}
	a := []int64{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s where an integer was expected", describe(tok))
		}
		v, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer of 64 bits", num)
		}
		a = append(a, v)
	}
	_, err = d.Token()
	return a, err
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("the string %q", v)
	default:
		return fmt.Sprint(v)
	}
}

// checkText refuses text that encoding/json would decode lossily: bytes
// that are not UTF-8, and \u escapes of a lone surrogate (both become
// U+FFFD). Escapes only appear inside strings in valid JSON; a backslash
// anywhere else is refused by the decoder whatever this says.
func checkText(js []byte) error {
	if !utf8.Valid(js) {
		return errors.New("not valid UTF-8")
	}
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' {
			continue
		}
		i++ // the escaped character; a \\ so skipped cannot start an escape
		if i >= len(js) || js[i] != 'u' {
			continue
		}
		r, ok := hex4(js[i+1:])
		if !ok {
			continue // the decoder refuses a malformed escape
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("a lone surrogate \\u%04x", r)
		case r >= 0xD800 && r <= 0xDBFF:
			rest := js[i+5:]
			if len(rest) < 2 || rest[0] != '\\' || rest[1] != 'u' {
				return fmt.Errorf("a lone surrogate \\u%04x", r)
			}
			if lo, ok := hex4(rest[2:]); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("a lone surrogate \\u%04x", r)
			}
			i += 4 + 6 // past this escape and its low half
		default:
			i += 4
		}
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}
