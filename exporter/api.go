package exporter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// MaxRequestBytes bounds an API request body; a heartbeat is under 200 bytes.
const MaxRequestBytes = 64 << 10

// API paths.
const (
	HeartbeatPath = "/api/v1/heartbeat"
	RunsPath      = "/api/v1/runs"
	PhasesPath    = "/api/v1/phases"
)

// HeartbeatRequest is the body of POST /api/v1/heartbeat.
type HeartbeatRequest struct {
	Phase  string `json:"phase"`
	Event  string `json:"event"`            // start, ping or end
	Status string `json:"status,omitempty"` // ok or failed, with end only; default ok
}

// RunRequest is the body of POST /api/v1/runs.
type RunRequest struct {
	Header string `json:"header,omitempty"`
}

// RunResponse answers POST /api/v1/runs.
type RunResponse struct {
	Run Run `json:"run"`
}

// PhasesResponse answers GET /api/v1/phases.
type PhasesResponse struct {
	Run    *Run    `json:"run"` // null before the first run
	Phases []Phase `json:"phases"`
}

type errorResponse struct {
	Error string `json:"error"`
}

// Register adds the heartbeat API to mux. Methods are checked by hand
// rather than with method patterns so that a 405 also gets a JSON body.
func (e *Exporter) Register(mux *http.ServeMux) {
	mux.Handle(HeartbeatPath, allow(http.HandlerFunc(e.handleHeartbeat), http.MethodPost))
	mux.Handle(RunsPath, allow(http.HandlerFunc(e.handleRuns), http.MethodPost))
	mux.Handle(PhasesPath, allow(http.HandlerFunc(e.handlePhases), http.MethodGet, http.MethodHead))
}

// onlyPath answers 404 for every path but path. A mux pattern ending in a
// slash ("/" above all) catches every path below it, and without this a
// typo such as POST /webhooks would get the 405 of the page at "/", which
// sends the user looking at the method instead of the path.
func onlyPath(path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no such path %s", r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func allow(h http.Handler, methods ...string) http.Handler {
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

func (e *Exporter) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req HeartbeatRequest
	if status, err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, status, err.Error())
		return
	}
	p, err := e.Heartbeat(req.Phase, req.Event, req.Status)
	if err != nil {
		writeError(w, heartbeatStatus(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func heartbeatStatus(err error) int {
	switch {
	case errors.Is(err, ErrBadEvent), errors.Is(err, ErrBadStatus), errors.Is(err, ErrBadPhaseName):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownPhase):
		return http.StatusNotFound
	case errors.Is(err, ErrPhaseEnded):
		return http.StatusConflict
	case errors.Is(err, ErrTooManyPhases):
		// 409, not 429: the request is refused because of the table's
		// state (64 phases all active), which no amount of waiting fixes;
		// only ending a phase does. 429 would tell clients to retry later.
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func (e *Exporter) handleRuns(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	if status, err := decodeBody(w, r, &req, true); err != nil {
		writeError(w, status, err.Error())
		return
	}
	path, err := e.StartRun(req.Header, "")
	if err != nil {
		e.logger.Error("run not started", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot start a run log; see the exporter's log")
		return
	}
	run, _ := e.Snapshot()
	resp := RunResponse{Run: Run{File: filepath.Base(path)}}
	if run != nil && run.File == resp.Run.File {
		resp.Run = *run
	}
	writeJSON(w, http.StatusCreated, resp)
}

func (e *Exporter) handlePhases(w http.ResponseWriter, r *http.Request) {
	run, phases := e.Snapshot()
	writeJSON(w, http.StatusOK, PhasesResponse{Run: run, Phases: phases})
}

// decodeBody reads one JSON object of at most MaxRequestBytes into v. It
// returns the status code to answer with on failure.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) (int, error) {
	body := http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", tooBig.Limit)
		}
		return http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	if emptyOK && len(bytes.TrimSpace(data)) == 0 {
		return 0, nil
	}
	if !utf8.Valid(data) {
		// encoding/json would quietly turn bad bytes into U+FFFD.
		return http.StatusBadRequest, errors.New("malformed JSON: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return http.StatusBadRequest, errors.New("malformed JSON: data after the object")
	}
	return 0, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorResponse{Error: msg})
}
