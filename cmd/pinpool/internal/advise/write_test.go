package advise

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
)

func TestWrite(t *testing.T) {
	adv := []Advice{
		{Topic: "pool", Advice: "Use the pool.", Evidence: "300 M/s\nvs 1.9 M/s", Measured: true},
		{Topic: "direct-below", Advice: "Set DirectBelow.", Evidence: "", Measured: true},
		{Topic: "mapped", Advice: "No advice on mapped.", Evidence: "not measured: mapped"},
	}
	var b bytes.Buffer
	if err := Write(&b, adv); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"pool          Use the pool.\n" +
		"              300 M/s vs 1.9 M/s\n" +
		"direct-below  Set DirectBelow.\n" +
		"mapped        [not measured] No advice on mapped.\n" +
		"              not measured: mapped\n"
	if b.String() != want {
		t.Errorf("Write:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteAdviseAligned(t *testing.T) {
	adv := Advise(h200Report())
	var b bytes.Buffer
	if err := Write(&b, adv); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	col := len(TopicPinned) + 2 // the longest topic
	topics := 0
	for i, l := range lines {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("line %d not aligned at column %d: %q", i, col, l)
		}
		if l[0] != ' ' {
			topics++
		}
		if n := utf8.RuneCountInString(l); n > textwrap.Width {
			t.Errorf("line %d has %d characters, more than %d: %q", i, n, textwrap.Width, l)
		}
	}
	if topics != len(adv) {
		t.Fatalf("%d topic lines for %d advice lines:\n%s", topics, len(adv), b.String())
	}
}

type failWriter struct{}

var errFail = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errFail }

func TestWriteErrors(t *testing.T) {
	for name, err := range map[string]error{
		"Write":     Write(failWriter{}, Advise(nil)),
		"WriteJSON": WriteJSON(failWriter{}, Advise(nil)),
	} {
		if !errors.Is(err, errFail) || !strings.HasPrefix(err.Error(), "advise: ") {
			t.Errorf("%s: error %v, want advise: ... wrapping %v", name, err, errFail)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	adv := Advise(h200Report())
	var b bytes.Buffer
	if err := WriteJSON(&b, adv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "DirectBelow: 2 << 20") || strings.Contains(b.String(), `\u003c`) {
		t.Errorf("Go code escaped in JSON:\n%s", b.String())
	}
	for _, key := range []string{`"topic"`, `"advice"`, `"evidence"`, `"measured"`} {
		if !strings.Contains(b.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	var back []Advice
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, adv) {
		t.Errorf("JSON round trip differs:\n%v\n%v", back, adv)
	}

	b.Reset()
	if err := WriteJSON(&b, nil); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(b.String()) != "[]" {
		t.Errorf("WriteJSON(nil) = %q, want []", b.String())
	}
}
