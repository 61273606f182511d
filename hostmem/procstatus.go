package hostmem

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parseStatusKB finds the line "key:   <value> kB" in a /proc/<pid>/status
// style text and returns value (in kB, as written). found is false when no
// line has the key. A line with the key but a malformed value is an error.
// Only the first matching line counts.
func parseStatusKB(r io.Reader, key string) (kb uint64, found bool, err error) {
	br := bufio.NewReader(r)
	prefix := key + ":"
	for {
		line, rerr := br.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, prefix); ok && key != "" {
			v, perr := parseKBValue(rest)
			if perr != nil {
				return 0, true, fmt.Errorf("hostmem: status line %q: %w", strings.TrimSpace(line), perr)
			}
			return v, true, nil
		}
		if rerr == io.EOF {
			return 0, false, nil
		}
		if rerr != nil {
			return 0, false, fmt.Errorf("hostmem: reading status: %w", rerr)
		}
	}
}

// parseKBValue parses "   1234 kB\n" into 1234. The unit is optional.
func parseKBValue(s string) (uint64, error) {
	fields := strings.Fields(s)
	switch {
	case len(fields) == 0:
		return 0, errors.New("no value")
	case len(fields) > 2, len(fields) == 2 && fields[1] != "kB":
		return 0, errors.New("want a number of kB")
	}
	return strconv.ParseUint(fields[0], 10, 64)
}
