package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The floor drives the service's own SDK authentication with signed submits and needs no
// database: every submit is answered, none refused.
func TestBenchFloorAnswersSignedSubmits(t *testing.T) {
	var out bytes.Buffer
	if err := runFloor(t.Context(), &out, benchOptions{clients: 4, duration: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^floor: (\d+) signed submits in .* with 4 clients: \d+ submits/s \(.*no database; (\d+) errors\)\n$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("bench floor printed %q", out.String())
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("no submit answered: %q", out.String())
	}
	if m[2] != "0" {
		t.Errorf("refused submits: %q", out.String())
	}
}
