package barktest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// AppDecrypt is the Bark app's side of an encrypted push, written here from
// the reference facts and the app's CiphertextProcessor, and sharing no
// code with the sender: the key is the UTF-8 bytes of the string typed into
// the app, the IV the bytes of the iv parameter, GCM carries its 16-byte tag
// at the end, CBC is PKCS#7 padded, and the ciphertext is standard base64.
// Like the app it lowercases the JSON keys and turns numbers into strings.
func AppDecrypt(t testing.TB, mode, key, iv, ciphertext string) map[string]string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(ciphertext)
	if err != nil {
		t.Fatalf("ciphertext is not standard base64: %v", err)
	}
	block, err := aes.NewCipher([]byte(key))
	if err != nil {
		t.Fatalf("app: key: %v", err)
	}
	var plain []byte
	switch mode {
	case "gcm":
		if len(iv) != 12 {
			t.Fatalf("GCM IV has %d characters, the app needs 12", len(iv))
		}
		g, err := cipher.NewGCMWithNonceSize(block, 12)
		if err != nil {
			t.Fatal(err)
		}
		if plain, err = g.Open(nil, []byte(iv), raw, nil); err != nil {
			t.Fatalf("app: Decryption Failed: %v", err)
		}
	case "cbc":
		if len(iv) != 16 {
			t.Fatalf("CBC IV has %d characters, the app needs 16", len(iv))
		}
		if len(raw) == 0 || len(raw)%16 != 0 {
			t.Fatalf("CBC ciphertext of %d bytes is not whole blocks", len(raw))
		}
		plain = make([]byte, len(raw))
		cipher.NewCBCDecrypter(block, []byte(iv)).CryptBlocks(plain, raw)
		n := int(plain[len(plain)-1])
		if n < 1 || n > 16 || !bytes.Equal(plain[len(plain)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
			t.Fatalf("app: bad PKCS#7 padding %d", n)
		}
		plain = plain[:len(plain)-n]
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("app: JSON parsing failed: %v (%q)", err, plain)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch v := v.(type) {
		case string:
			out[strings.ToLower(k)] = v
		case json.Number:
			out[strings.ToLower(k)] = v.String()
		default:
			t.Fatalf("app: key %q has a %T; the app reads strings (and numbers as strings)", k, v)
		}
	}
	return out
}
