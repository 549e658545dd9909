package checksum

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

var errTest = errors.New("test: format")

// sealed returns body followed by its SHA-256, the layout CheckTrailer checks.
func sealed(body string) []byte {
	sum := sha256.Sum256([]byte(body))
	return append([]byte(body), sum[:]...)
}

func TestCheckTrailer(t *testing.T) {
	good := sealed("sections")
	n := len("sections")
	if err := CheckTrailer(good, good[n:], errTest); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	flipped := append([]byte(nil), good...)
	flipped[0] ^= 1
	withTail := append(append([]byte(nil), good...), 0, 0, 0)
	for _, c := range []struct {
		name       string
		data, rest []byte
		want       string
	}{
		{"truncated", good[:len(good)-1], good[n : len(good)-1], "truncated: 31 bytes where the 32-byte SHA-256 should be"},
		{"empty trailer", good[:n], good[n:n], "truncated: 0 bytes where the 32-byte SHA-256 should be"},
		{"trailing data", withTail, withTail[n:], "3 bytes of trailing data after the SHA-256"},
		{"altered body", flipped, flipped[n:], "corrupt: SHA-256 mismatch"},
		{"altered sum", append(good[:len(good)-1:len(good)-1], good[len(good)-1]^1), nil, "corrupt: SHA-256 mismatch"},
	} {
		rest := c.rest
		if rest == nil {
			rest = c.data[n:]
		}
		err := CheckTrailer(c.data, rest, errTest)
		if !errors.Is(err, errTest) {
			t.Errorf("%s: error %v does not wrap the format error", c.name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "test: format: "+c.want) {
			t.Errorf("%s: error %q, want it to start %q", c.name, err, "test: format: "+c.want)
		}
	}
}
