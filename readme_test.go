package pinpool

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMECodeIsFromExamples keeps README.md's Go code compiled: every
// ```go block of it must appear, line for line (leading and trailing blanks
// of each line aside), in an example_test.go file of the repository, where
// go vet and go test compile it and run it.
func TestREADMECodeIsFromExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := goBlocks(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block: has the fence changed?")
	}
	examples := exampleFiles(t, ".")
	if len(examples) == 0 {
		t.Fatal("no example_test.go file found")
	}
	for _, b := range missingBlocks(blocks, examples) {
		t.Errorf("README.md:%d: the ```go block starting %q is in no example_test.go file: quote it from a compiled Example", b.line, b.first())
	}
}

// TestREADMEBlockMatching checks the matcher itself: indentation does not
// matter, but every line does, in order and with nothing between.
func TestREADMEBlockMatching(t *testing.T) {
	const md = "text\n```go\nx := 1\n\nfmt.Println(x)\n```\n" +
		"```sh\nnot go\n```\n" +
		"  ```go\ny := 2\n  ```\n"
	blocks, err := goBlocks(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].line != 2 || blocks[1].first() != "y := 2" {
		t.Fatalf("blocks = %+v", blocks)
	}
	file := map[string][]string{"example_test.go": normalize("func Example() {\n\tx := 1\n\n\tfmt.Println(x) \n}\n")}
	if m := missingBlocks(blocks[:1], file); len(m) != 0 {
		t.Errorf("indented copy not found: %+v", m)
	}
	if m := missingBlocks(blocks[1:], file); len(m) != 1 {
		t.Errorf("absent block found")
	}
	drift := map[string][]string{"example_test.go": normalize("x := 1\nfmt.Println(x)\n")}
	if m := missingBlocks(blocks[:1], drift); len(m) != 1 {
		t.Errorf("block found without its blank line")
	}
	if _, err := goBlocks("```go\nx := 1\n"); err == nil {
		t.Error("unclosed block accepted")
	}
}

// mdBlock is a fenced code block: its lines, normalized, and the line
// number of its opening fence.
type mdBlock struct {
	line  int
	lines []string
}

func (b mdBlock) first() string {
	for _, l := range b.lines {
		if l != "" {
			return l
		}
	}
	return ""
}

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(md string) ([]mdBlock, error) {
	var blocks []mdBlock
	var cur *mdBlock
	for i, l := range strings.Split(md, "\n") {
		fence := strings.TrimSpace(l)
		switch {
		case cur == nil && fence == "```go":
			cur = &mdBlock{line: i + 1}
		case cur != nil && fence == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, normalizeLine(l))
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the ```go block opened at line %d is not closed", cur.line)
	}
	return blocks, nil
}

func normalizeLine(l string) string { return strings.TrimSpace(l) }

func normalize(text string) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = normalizeLine(l)
	}
	return lines
}

// exampleFiles reads every example_test.go under root, skipping hidden
// folders and testdata, normalized, by path.
func exampleFiles(t *testing.T, root string) map[string][]string {
	t.Helper()
	files := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "example_test.go" {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[path] = normalize(string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// missingBlocks returns the blocks that appear, as consecutive lines, in
// none of the files.
func missingBlocks(blocks []mdBlock, files map[string][]string) []mdBlock {
	var missing []mdBlock
	for _, b := range blocks {
		found := false
		for _, lines := range files {
			if containsRun(lines, b.lines) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, b)
		}
	}
	return missing
}

// containsRun reports whether run occurs in lines as consecutive elements.
func containsRun(lines, run []string) bool {
	if len(run) == 0 {
		return true
	}
	for i := 0; i+len(run) <= len(lines); i++ {
		match := true
		for j, r := range run {
			if lines[i+j] != r {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
