package seal_test

import (
	"testing"

	"github.com/switchyard/switchyard/seal"
)

func TestMACVerifiesUnderEveryKeyAndOnlyForItsPurposeAndMessage(t *testing.T) {
	oldKey, _ := seal.GenerateKey()
	newKey, _ := seal.GenerateKey()
	old, err := seal.New(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := seal.New(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := old.MAC("approval-url", []byte("run/stage"))
	if !rotated.VerifyMAC("approval-url", []byte("run/stage"), sum) {
		t.Fatal("a MAC of the previous key does not verify after a rotation")
	}
	if rotated.VerifyMAC("other", []byte("run/stage"), sum) || rotated.VerifyMAC("approval-url", []byte("run/stagf"), sum) {
		t.Fatal("a MAC verifies for another purpose or message")
	}
	other, _ := seal.GenerateKey()
	stranger, _ := seal.New(other)
	if stranger.VerifyMAC("approval-url", []byte("run/stage"), sum) {
		t.Fatal("a MAC verifies under an unrelated key")
	}
	if string(rotated.MAC("approval-url", []byte("run/stage"))) == string(sum) {
		t.Fatal("the new key signs as the old one did")
	}
}
