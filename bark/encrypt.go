package bark

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
)

// EncryptionKey is the *.bark.env key whose value, "<algorithm>:<key>",
// turns on end-to-end encryption for the templates after it in that file.
const EncryptionKey = "BARK_ENCRYPTION"

// encryptedPathBody replaces $0 in an encrypted push's template. bark-server
// puts it in the APNs alert, and the app overwrites the alert with the
// decrypted message (or with "Decryption Failed"), so only an app that
// cannot decrypt at all ever shows it. It must say nothing of the message.
const encryptedPathBody = "encrypted"

// Bark app IV lengths, in characters (= bytes: the IV is ASCII). The app
// (Model/Algorithm.swift) requires exactly these for CBC and GCM.
const (
	cbcIVLen = 16
	gcmIVLen = 12
)

// ivAlphabet holds the characters of a random IV. Each is unreserved in a
// URL and in a form, so the IV reaches the app byte for byte without any
// escaping, and each is one byte, so characters and bytes agree as the app
// assumes (it uses the UTF-8 bytes of the IV string).
const ivAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

type encryptionMode int

const (
	modeGCM encryptionMode = iota
	modeCBC
)

// encryptionAlgorithms are the settings the Bark app offers (Settings →
// Push Encryption) that lavender supports, by the name a *.bark.env file
// uses. ECB is left out on purpose: it has no IV, so equal messages give
// equal ciphertexts, which tells an observer when an alert repeats.
var encryptionAlgorithms = []struct {
	name   string
	keyLen int
	mode   encryptionMode
}{
	{"aes-128-gcm", 16, modeGCM},
	{"aes-192-gcm", 24, modeGCM},
	{"aes-256-gcm", 32, modeGCM},
	{"aes-128-cbc", 16, modeCBC},
	{"aes-192-cbc", 24, modeCBC},
	{"aes-256-cbc", 32, modeCBC},
}

func encryptionAlgorithmNames() string {
	names := make([]string, len(encryptionAlgorithms))
	for i, a := range encryptionAlgorithms {
		names[i] = a.name
	}
	return strings.Join(names, ", ")
}

// encryption is one BARK_ENCRYPTION setting, ready to seal pushes.
//
// It keeps no copy of the key: only the AES block, which holds the key
// schedule behind a pointer, so even fmt's reflection on a struct that has
// an encryption as an unexported field prints an address, never key bytes.
// String, GoString, Format and LogValue print the algorithm only.
type encryption struct {
	algorithm string // e.g. "aes-256-gcm"
	mode      encryptionMode
	block     cipher.Block
	aead      cipher.AEAD // GCM only
	random    io.Reader   // source of IVs; crypto/rand unless a test says otherwise
}

// parseEncryption parses the value of a BARK_ENCRYPTION line. Its errors are
// fixed texts plus lengths and algorithm names, never any part of value,
// since value holds the key (and a user who swapped the two halves would
// otherwise see the key in the "unknown algorithm" error). The caller adds
// "file:line: ".
func parseEncryption(value string) (*encryption, error) {
	value = unquoteEnvValue(value)
	algName, key, ok := strings.Cut(value, ":")
	if !ok {
		return nil, errors.New(EncryptionKey + " must be <algorithm>:<key>, e.g. aes-256-gcm:<the 32 characters typed into the Bark app>")
	}
	algName = strings.ToLower(strings.TrimSpace(algName))
	if strings.HasSuffix(algName, "-ecb") && strings.HasPrefix(algName, "aes-") {
		return nil, errors.New(EncryptionKey + ": ECB mode is not supported, since it lets an observer see when a message repeats; choose GCM (or CBC) in the Bark app and here")
	}
	for _, a := range encryptionAlgorithms {
		if a.name != algName {
			continue
		}
		if key == "" {
			return nil, fmt.Errorf("%s: the key after %q is empty; %s needs the %d characters typed into the Bark app", EncryptionKey, a.name+":", a.name, a.keyLen)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				// The app checks the key's length in characters but hands
				// AES its UTF-8 bytes, so only ASCII keys work there.
				return nil, fmt.Errorf("%s: the key must be printable ASCII characters (letters, digits, punctuation); the Bark app accepts no others", EncryptionKey)
			}
		}
		if len(key) != a.keyLen {
			return nil, fmt.Errorf("%s: %s needs a key of exactly %d characters, this one has %d", EncryptionKey, a.name, a.keyLen, len(key))
		}
		block, err := aes.NewCipher([]byte(key))
		if err != nil {
			// Unreachable with the lengths above; aes's error names only the size.
			return nil, fmt.Errorf("%s: %s: %w", EncryptionKey, a.name, err)
		}
		e := &encryption{algorithm: a.name, mode: a.mode, block: block, random: rand.Reader}
		if a.mode == modeGCM {
			if e.aead, err = cipher.NewGCM(block); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", EncryptionKey, a.name, err)
			}
		}
		return e, nil
	}
	return nil, errors.New(EncryptionKey + ": unknown algorithm; use one of " + encryptionAlgorithmNames() + " (the algorithm and mode chosen in the Bark app)")
}

// unquoteEnvValue drops one pair of surrounding quotes, as env files allow.
// No algorithm starts with a quote, so a leading quote is always quoting.
func unquoteEnvValue(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// Algorithm is the setting's name, e.g. "aes-256-gcm": what `bark send
// --test` shows, so a user can compare it with the app's setting.
func (e *encryption) Algorithm() string { return e.algorithm }

// String, GoString, Format and LogValue show the algorithm and never the key.
func (e *encryption) String() string {
	if e == nil {
		return "encryption(none)"
	}
	return "encryption(" + e.algorithm + ", key redacted)"
}

// GoString implements fmt.GoStringer.
func (e *encryption) GoString() string { return e.String() }

// Format implements fmt.Formatter, so that every verb (%x and %d included,
// which would otherwise dump fields) prints String.
func (e *encryption) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = io.WriteString(f, strconv.Quote(e.String()))
		return
	}
	_, _ = io.WriteString(f, e.String())
}

// LogValue implements slog.LogValuer.
func (e *encryption) LogValue() slog.Value { return slog.StringValue(e.String()) }

// pushParams is what an encrypted push carries inside its ciphertext. The
// JSON names are the Bark parameters; the app lowercases keys and turns
// numbers into strings, so strings are sent as they would be in a query
// ("isArchive":"1", which the app's ArchiveProcessor compares with "1").
// Empty fields are left out, so the app's own defaults apply.
type pushParams struct {
	Title     string `json:"title,omitempty"`
	Body      string `json:"body,omitempty"`
	Level     string `json:"level,omitempty"`
	IsArchive string `json:"isArchive,omitempty"`
	Group     string `json:"group,omitempty"`
	URL       string `json:"url,omitempty"`
	// ID also goes outside, in clear, where bark-server needs it for the
	// APNs collapse id. It is repeated inside because the app replaces the
	// push's userInfo with the decrypted map, so an id sent only outside
	// would not reach the app's archive, which keys its entries by id.
	ID string `json:"id,omitempty"`
}

// sealed is an encrypted push: the two parameters sent in place of the
// message and its parameters.
type sealed struct {
	Ciphertext string // standard base64 of the ciphertext (GCM: with its tag)
	IV         string // the raw IV characters
}

// Values are the form or query parameters of the sealed push.
func (s sealed) Values() url.Values {
	return url.Values{"ciphertext": {s.Ciphertext}, "iv": {s.IV}}
}

// encrypt seals p with a fresh random IV, the way the Bark app decrypts:
// AES-GCM with a 12-character IV and the 16-byte tag appended, or AES-CBC
// with a 16-character IV and PKCS#7 padding; the result is base64 (standard
// alphabet, padded) and the IV goes along as the characters themselves.
func (e *encryption) encrypt(p pushParams) (sealed, error) { return e.encryptJSON(p) }

// encryptJSON seals the JSON of v as encrypt does.
func (e *encryption) encryptJSON(v any) (sealed, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<" as \u003c is valid but wastes the APNs budget
	if err := enc.Encode(v); err != nil {
		return sealed{}, fmt.Errorf("bark: encrypt: %w", err)
	}
	plaintext := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	ivLen := gcmIVLen
	if e.mode == modeCBC {
		ivLen = cbcIVLen
	}
	iv, err := randomIV(e.random, ivLen)
	if err != nil {
		return sealed{}, fmt.Errorf("bark: encrypt: random IV: %w", err)
	}
	return sealed{Ciphertext: e.seal(plaintext, iv), IV: iv}, nil
}

// seal encrypts plaintext with the given IV; encrypt draws the IV. It is
// separate so that tests can check it against the app's published vectors.
func (e *encryption) seal(plaintext []byte, iv string) string {
	var out []byte
	switch e.mode {
	case modeGCM:
		out = e.aead.Seal(nil, []byte(iv), plaintext, nil)
	case modeCBC:
		pad := aes.BlockSize - len(plaintext)%aes.BlockSize // 1..16: a full block when aligned
		out = make([]byte, len(plaintext)+pad)
		copy(out, plaintext)
		for i := len(plaintext); i < len(out); i++ {
			out[i] = byte(pad)
		}
		cipher.NewCBCEncrypter(e.block, []byte(iv)).CryptBlocks(out, out)
	}
	return base64.StdEncoding.EncodeToString(out)
}

// randomIV draws n characters of ivAlphabet uniformly, by rejection: 62
// letters and digits do not divide 256, so bytes >= 248 are thrown away.
func randomIV(r io.Reader, n int) (string, error) {
	const limit = 256 - 256%len(ivAlphabet)
	iv := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for tries := 0; len(iv) < n; tries++ {
		if tries == 64 {
			return "", errors.New("random source keeps giving unusable bytes")
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if int(b) < limit && len(iv) < n {
				iv = append(iv, ivAlphabet[int(b)%len(ivAlphabet)])
			}
		}
	}
	return string(iv), nil
}
