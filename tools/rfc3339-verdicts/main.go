// Command rfc3339-verdicts records what Go's time.Parse(time.RFC3339, s) says about each string of
// a JSON array read from stdin: the reference test/unit/lock/go-rfc3339.test.ts holds our parser to
// (HAMi parses lock stamps with exactly this call). Regenerate the fixture with the command at the
// top of that test.
package main

import (
	"encoding/json"
	"os"
	"time"
)

type verdict struct {
	Text string `json:"text"`
	OK   bool   `json:"ok"`
	// Milliseconds since the Unix epoch, truncated as our parser keeps them; absent when !OK.
	UnixMilli *int64 `json:"unixMilli,omitempty"`
}

func main() {
	var texts []string
	if err := json.NewDecoder(os.Stdin).Decode(&texts); err != nil {
		panic(err)
	}
	verdicts := make([]verdict, 0, len(texts))
	for _, text := range texts {
		t, err := time.Parse(time.RFC3339, text)
		if err != nil {
			verdicts = append(verdicts, verdict{Text: text})
			continue
		}
		ms := t.UnixMilli()
		verdicts = append(verdicts, verdict{Text: text, OK: true, UnixMilli: &ms})
	}
	// One verdict per line: a diff of a regenerated fixture shows which strings changed.
	os.Stdout.WriteString("[\n")
	for i, v := range verdicts {
		line, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		if i > 0 {
			os.Stdout.WriteString(",\n")
		}
		os.Stdout.Write(line)
	}
	os.Stdout.WriteString("\n]\n")
}
