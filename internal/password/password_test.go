package password

import (
	"strings"
	"testing"
)

func TestHashVerify(t *testing.T) {
	h, err := Hash("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$") {
		t.Fatalf("hash %q is not PHC argon2id", h)
	}
	if ok, err := Verify(h, "correct horse"); err != nil || !ok {
		t.Fatalf("Verify(right) = %v, %v", ok, err)
	}
	if ok, _ := Verify(h, "wrong horse"); ok {
		t.Fatal("Verify(wrong) = true")
	}
	h2, _ := Hash("correct horse")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	if _, err := Verify("$bcrypt$x", "a"); err == nil {
		t.Fatal("malformed hash accepted")
	}
}
