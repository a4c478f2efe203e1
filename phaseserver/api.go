package phaseserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lavender-ml/lavender/phaseapi"
)

// Register adds the heartbeat API to mux. Methods are checked by hand
// rather than with method patterns so that a 405 also gets a JSON body.
func (s *Server) Register(mux *http.ServeMux) {
	mux.Handle(phaseapi.HeartbeatPath, AllowMethods(http.HandlerFunc(s.handleHeartbeat), http.MethodPost))
	mux.Handle(phaseapi.RunsPath, AllowMethods(http.HandlerFunc(s.handleRuns), http.MethodPost))
	mux.Handle(phaseapi.PhasesPath, AllowMethods(http.HandlerFunc(s.handlePhases), http.MethodGet, http.MethodHead))
}

// AllowMethods passes a request in one of methods to h and answers any
// other with 405, an Allow header and the API's JSON error body. The
// status page uses it too, so lavender's 405s read the same everywhere.
func AllowMethods(h http.Handler, methods ...string) http.Handler {
	allowed := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range methods {
			if r.Method == m {
				h.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("Allow", allowed)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; use %s", r.Method, allowed))
	})
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req phaseapi.HeartbeatRequest
	data, status, err := readBody(w, r)
	if err == nil {
		err = decodeHeartbeat(data, &req)
		status = http.StatusBadRequest
	}
	if err != nil {
		s.refused(refusedReason(status, err), err)
		writeError(w, status, err.Error())
		return
	}
	p, warning, err := s.apply(req)
	if err != nil {
		status := heartbeatStatus(err)
		s.refused(refusedReason(status, err), err)
		writeError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, phaseapi.HeartbeatResponse{Phase: p, Warning: warning})
}

// decodeHeartbeat reads a heartbeat with decodeStrict, except that a reason
// of any bytes never costs the end it explains: a body the strict reading
// refuses is read again with its reason's bad text (invalid UTF-8, a lone
// surrogate) replaced by U+FFFD. Everything else is held to the strict
// rules, so a bad phase name or a duplicate field is still a 400.
func decodeHeartbeat(data []byte, req *phaseapi.HeartbeatRequest) error {
	err := decodeStrict(data, req)
	if err == nil {
		return nil
	}
	fixed, ok := replaceBadReason(data)
	if !ok {
		return err
	}
	*req = phaseapi.HeartbeatRequest{}
	return decodeStrict(fixed, req)
}

// replaceBadReason rewrites a JSON object whose top-level "reason" string
// holds invalid UTF-8 or lone surrogates, with that text replaced by
// U+FFFD; every other member is copied byte for byte. ok is false when
// there is nothing to replace or the body is no object.
func replaceBadReason(data []byte) (fixed []byte, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, false
	}
	// Built by hand: an encoder that allows invalid UTF-8 would mangle the
	// other members' bad text too, and they must stay refusable.
	out := []byte{'{'}
	replaced := false
	for dec.PeekKind() != '}' {
		// A read value lives only until the next read: keep a copy.
		name, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		name = name.Clone()
		value, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		var text string
		if string(name) == `"reason"` && value.Kind() == '"' && jsonv2.Unmarshal(value, &text) != nil {
			if jsonv2.Unmarshal(value, &text, jsontext.AllowInvalidUTF8(true)) != nil {
				return nil, false
			}
			v, err := jsontext.AppendQuote(nil, text)
			if err != nil {
				return nil, false
			}
			value, replaced = v, true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, name...), ':'), value...)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false // something after the object: let the strict error stand
	}
	return append(out, '}'), replaced
}

// Reasons of lavender_heartbeats_refused_total.
const (
	refusedMalformed    = "malformed"
	refusedTooLarge     = "too_large"
	refusedBadField     = "bad_field"
	refusedUnknownPhase = "unknown_phase"
	refusedEnded        = "ended"
	refusedOKAfterFail  = "ok_after_failed"
	refusedTooMany      = "too_many_phases"
	refusedOther        = "other"
)

// refusedReasons are every value of the reason label, so each series
// exists from the start.
var refusedReasons = []string{refusedMalformed, refusedTooLarge, refusedBadField, refusedUnknownPhase, refusedEnded, refusedOKAfterFail, refusedTooMany, refusedOther}

func refusedReason(status int, err error) string {
	switch {
	case status == http.StatusRequestEntityTooLarge:
		return refusedTooLarge
	case errors.Is(err, errOKAfterFailed):
		return refusedOKAfterFail
	case errors.Is(err, errPhaseEnded):
		return refusedEnded
	case errors.Is(err, errUnknownPhase):
		return refusedUnknownPhase
	case errors.Is(err, errTooManyPhases):
		return refusedTooMany
	case status == http.StatusBadRequest && strings.HasPrefix(err.Error(), "malformed JSON"):
		return refusedMalformed
	case status == http.StatusBadRequest:
		return refusedBadField
	}
	return refusedOther
}

func heartbeatStatus(err error) int {
	switch {
	case errors.Is(err, errBadEvent), errors.Is(err, errBadStatus), errors.Is(err, phaseapi.ErrBadPhaseName), errors.Is(err, errBadProgress), errors.Is(err, phaseapi.ErrBadField):
		return http.StatusBadRequest
	case errors.Is(err, errUnknownPhase):
		return http.StatusNotFound
	case errors.Is(err, errPhaseEnded), errors.Is(err, errOKAfterFailed):
		return http.StatusConflict
	case errors.Is(err, errTooManyPhases):
		// 409, not 429: the request is refused because of the table's
		// state (64 phases all active), which no amount of waiting fixes;
		// only ending a phase does. 429 would tell clients to retry later.
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	var req phaseapi.RunRequest
	if status, err := decodeBody(w, r, &req, true); err != nil {
		writeError(w, status, err.Error())
		return
	}
	path, err := s.StartRun(req.Header, "")
	if err != nil {
		s.logger.Error("run not started", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot start a run log; see the exporter's log")
		return
	}
	run, _ := s.Snapshot()
	resp := phaseapi.RunResponse{Run: phaseapi.Run{File: filepath.Base(path)}}
	if run != nil && run.File == resp.Run.File {
		resp.Run = *run
	}
	writeJSON(w, http.StatusCreated, resp)
}

func (s *Server) handlePhases(w http.ResponseWriter, r *http.Request) {
	run, phases := s.Snapshot()
	writeJSON(w, http.StatusOK, phaseapi.PhasesResponse{Run: run, Phases: phases})
}

// decodeBody reads one JSON object of at most phaseapi.MaxRequestBytes
// into v with decodeStrict. It returns the status code to answer with on failure.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) (int, error) {
	data, status, err := readBody(w, r)
	if err != nil {
		return status, err
	}
	if emptyOK && len(bytes.TrimSpace(data)) == 0 {
		return 0, nil
	}
	if err := decodeStrict(data, v); err != nil {
		return http.StatusBadRequest, err
	}
	return 0, nil
}

// readBody reads a request body of at most phaseapi.MaxRequestBytes. It
// returns the status code to answer with on failure.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	body := http.MaxBytesReader(w, r.Body, phaseapi.MaxRequestBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", tooBig.Limit)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	return data, 0, nil
}

// decodeStrict reads data, one JSON value and nothing after it, into v and
// refuses anything a typo or a second meaning could hide behind: a member
// v does not define, a name that matches a field only when case is ignored,
// a name given twice, invalid UTF-8 and lone surrogates (\ud800). Every
// body lavender itself defines is read with it; encoding/json would skip the
// unknown name, match "Event" to event with the last one winning, and turn
// bad text into U+FFFD so that distinct names collide.
//
// It uses github.com/go-json-experiment/json (the encoding/json/v2
// proposal), whose defaults already reject duplicates and invalid text and
// match names case-sensitively.
func decodeStrict(data []byte, v any) error {
	err := jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var semErr *jsonv2.SemanticError
	if errors.As(err, &semErr) && errors.Is(semErr.Err, phaseapi.ErrBadField) {
		// A type's own check (a loss that is no number) says it best.
		return semErr.Err
	}
	if errors.As(err, &semErr) && errors.Is(err, jsonv2.ErrUnknownName) {
		return fmt.Errorf("malformed JSON: unknown field %q", lastPointerToken(string(semErr.JSONPointer)))
	}
	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) && errors.Is(synErr.Err, jsontext.ErrDuplicateName) {
		return fmt.Errorf("malformed JSON: duplicate field %q", lastPointerToken(string(synErr.JSONPointer)))
	}
	if semErr != nil && semErr.GoType != nil && semErr.JSONKind == '0' && isUnsigned(semErr.GoType.Kind()) {
		// A negative or fractional number, or one past 2^64: name the rule.
		return fmt.Errorf("malformed JSON: %q must be a whole number, 0 or more", lastPointerToken(string(semErr.JSONPointer)))
	}
	if semErr != nil && semErr.GoType != nil && semErr.JSONKind != 0 {
		where := "the body"
		if semErr.JSONPointer != "" {
			where = strconv.Quote(lastPointerToken(string(semErr.JSONPointer)))
		}
		return fmt.Errorf("malformed JSON: %s must be %s, not %s", where, jsonKindOf(semErr.GoType.Kind()), jsonKindName(semErr.JSONKind))
	}
	msg := err.Error()
	for _, prefix := range []string{"jsontext: ", "json: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return fmt.Errorf("malformed JSON: %s", msg)
}

func isUnsigned(k reflect.Kind) bool {
	switch k {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// jsonKindOf names what JSON a Go kind is read from, for error messages
// that name no Go type.
func jsonKindOf(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "a number"
}

func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	}
	return k.String()
}

// lastPointerToken is the member name at the end of an RFC 6901 pointer.
func lastPointerToken(ptr string) string {
	name := ptr[strings.LastIndexByte(ptr, '/')+1:]
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
}

// writeJSON answers v as JSON. nosniff: an error may quote the request,
// and no browser may take the answer for HTML.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, phaseapi.ErrorResponse{Error: msg})
}
