package httpapi

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// streamRetryAfter is the Retry-After of a stream refused for the cap, in seconds: a slot
// frees when one of the key's streams ends, which the server cannot foresee.
const streamRetryAfter = 5

// streamSlots counts the open streams of each key. It only holds keys with a stream open, so
// it is bounded by the connections the server holds.
type streamSlots struct {
	mu   sync.Mutex
	max  int
	open map[string]int
}

// acquire takes one of key's slots; ok is false when all are taken.
func (s *streamSlots) acquire(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] >= s.max {
		return false
	}
	s.open[key]++
	return true
}

func (s *streamSlots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] <= 1 {
		delete(s.open, key)
		return
	}
	s.open[key]--
}

// serveStream runs a Stream route's handler in one of the key's slots, or answers 429. The
// slot is held until the response ends: when the handler returns, or, if it took the
// connection over (an HTTP/1 stream outlives its handler, see serveSSE), when that connection
// is closed.
func (a *SDKAuth) serveStream(w http.ResponseWriter, r *http.Request, keyID string, h http.Handler) {
	if !a.streams.acquire(keyID) {
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		WriteError(w, http.StatusTooManyRequests, "too many open streams for this API key (at most "+
			strconv.Itoa(a.streams.max)+"); close one before opening another")
		return
	}
	var once sync.Once
	sw := &slotWriter{ResponseWriter: w, release: func() { once.Do(func() { a.streams.release(keyID) }) }}
	defer func() {
		if !sw.hijacked {
			sw.release()
		}
	}()
	h.ServeHTTP(sw, r)
}

// slotWriter hands a stream's slot over to the connection when the handler takes it over.
type slotWriter struct {
	http.ResponseWriter
	release  func()
	hijacked bool
}

// Hijack takes the connection over; closing it releases the slot.
func (s *slotWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	s.hijacked = true
	return &slotConn{Conn: conn, release: s.release}, brw, nil
}

// Flush lets the handler flush through the writer.
func (s *slotWriter) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

// Unwrap exposes the underlying writer to http.ResponseController.
func (s *slotWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// slotConn is a taken-over stream connection that frees its slot when closed.
type slotConn struct {
	net.Conn
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// detachSlot frees the slot of a taken-over stream's connection that goes on serving other
// requests, and returns the connection without its slot.
func detachSlot(conn net.Conn) net.Conn {
	if c, ok := conn.(*slotConn); ok {
		c.release()
		return c.Conn
	}
	return conn
}
