package notify

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// Redacted replaces a secret wherever one is found.
const Redacted = "<redacted>"

// maxSecrets bounds a Secrets; a real config has a few targets, each with
// a few forms of one secret.
const maxSecrets = 4096

// Secrets are the secret parts (keys, tokens, passwords, in every form
// sent) of every target a channel loaded in this process. A server that
// answers one target may quote another's (a shared proxy, a shared log),
// and text that never passed a target's own scrub (the standard log
// package, a library's error) needs them all. Targets a reload removed
// stay: their secrets are no less secret for it. The zero value is empty
// and ready; it is safe for concurrent use.
type Secrets struct {
	// MinLen: shorter parts are not kept, since replacing every "ab" in a
	// text protects nothing and garbles the rest.
	MinLen int

	mu       sync.RWMutex
	set      map[string]struct{}
	replacer *strings.Replacer
}

// Remember adds parts.
func (k *Secrets) Remember(parts []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.set == nil {
		k.set = make(map[string]struct{})
	}
	if len(k.set)+len(parts) > maxSecrets {
		// Only a fuzzer or a test loads thousands of targets; keep the
		// newest rather than grow without bound. Each target still
		// scrubs its own.
		clear(k.set)
	}
	added := false
	for _, s := range parts {
		if _, ok := k.set[s]; !ok && s != "" && len(s) >= k.MinLen {
			k.set[s] = struct{}{}
			added = true
		}
	}
	if !added && k.replacer != nil {
		return
	}
	// Longest first, so a secret is replaced whole before a part of it.
	all := make([]string, 0, len(k.set))
	for s := range k.set {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	pairs := make([]string, 0, 2*len(all))
	for _, s := range all {
		pairs = append(pairs, s, Redacted)
	}
	k.replacer = strings.NewReplacer(pairs...)
}

// Replace is s with every remembered part replaced by Redacted.
func (k *Secrets) Replace(s string) string {
	k.mu.RLock()
	r := k.replacer
	k.mu.RUnlock()
	if r == nil {
		return s
	}
	return r.Replace(s)
}
