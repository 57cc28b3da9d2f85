package token

import (
	"strings"
	"testing"
)

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys("# comment, with a comma\nk2:" + strings.Repeat("A", 44) + ",k1:" + strings.Repeat("B", 44) + "\n")
	if err != nil || len(keys) != 2 || keys[0].ID != "k2" || keys[1].ID != "k1" || len(keys[0].Secret) != 33 {
		t.Fatalf("ParseKeys = %+v, %v", keys, err)
	}
	for _, bad := range []string{"", "# only a comment", "nocolon", "k:not base64!"} {
		if _, err := ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}
