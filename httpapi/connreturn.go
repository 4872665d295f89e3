package httpapi

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// connReturnBacklog bounds the connections given back and not yet accepted again.
const connReturnBacklog = 256

// ConnReturn is a net.Listener of the connections that taken-over streams give back once
// their responses have ended cleanly, so that the server reads the client's next request from
// them as from a connection it accepted: a client that followed a long stream to its end
// keeps its connection for its next request, as after a stream served in place. The server
// serves it beside its own listener (http.Server.Serve) once Attach has hooked it to the
// server. Without one, a taken-over stream closes its connection when it ends.
type ConnReturn struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once
	served atomic.Bool
	// mu orders give against CloseWaiting, so that no connection is given back after it.
	mu sync.Mutex
	// waiting holds the connections given back on which no request has arrived yet.
	waiting sync.Map
}

// Attach hooks l to hs: its ConnContext tells the streams where to give connections back,
// its ConnState sees requests arrive on them, and its shutdown closes those still waiting for
// one. http.Server.Shutdown counts a connection that has not sent a request as idle only once
// it is 5 s old, so a client keeping a given-back connection open, as clients keep their
// idle connections, would otherwise hold every shutdown that long.
func (l *ConnReturn) Attach(hs *http.Server) {
	hs.ConnContext = l.ConnContext
	hs.ConnState = l.ConnState
	hs.RegisterOnShutdown(l.CloseWaiting)
}

// ConnState is http.Server.ConnState: a connection given back stops waiting once a request
// arrives on it (or it ends).
func (l *ConnReturn) ConnState(c net.Conn, s http.ConnState) {
	if s != http.StateNew {
		l.waiting.Delete(c)
	}
}

// CloseWaiting closes l and the connections given back on which no request has arrived, those
// not yet accepted again included.
func (l *ConnReturn) CloseWaiting() {
	l.mu.Lock()
	l.once.Do(func() { close(l.done) })
	l.mu.Unlock()
	l.waiting.Range(func(c, _ any) bool {
		l.waiting.Delete(c)
		_ = c.(net.Conn).Close()
		return true
	})
	for {
		select {
		case c := <-l.conns:
			_ = c.Close()
		default:
			return
		}
	}
}

// NewConnReturn makes the ConnReturn of a server listening at addr.
func NewConnReturn(addr net.Addr) *ConnReturn {
	return &ConnReturn{addr: addr, conns: make(chan net.Conn, connReturnBacklog), done: make(chan struct{})}
}

type connReturnKey struct{}

// ConnContext is http.Server.ConnContext: the connection's requests find the ConnReturn in
// their context.
func (l *ConnReturn) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connReturnKey{}, l)
}

// Accept returns the next connection given back.
func (l *ConnReturn) Accept() (net.Conn, error) {
	l.served.Store(true)
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; connections given back later are closed.
func (l *ConnReturn) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the server's address.
func (l *ConnReturn) Addr() net.Addr { return l.addr }

// taking reports whether the server serves l and it is open: a stream may then end its
// response for its connection to be given back.
func (l *ConnReturn) taking() bool {
	if l == nil || !l.served.Load() {
		return false
	}
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// give hands conn back to the server, or reports false when it is not taking connections
// (or its backlog is full): the caller then closes conn.
func (l *ConnReturn) give(conn net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.taking() {
		return false
	}
	l.waiting.Store(conn, struct{}{})
	select {
	case l.conns <- conn:
		return true
	default:
		l.waiting.Delete(conn)
		return false
	}
}

// connReturnFrom is the ConnReturn of ctx's server, nil when it has none.
func connReturnFrom(ctx context.Context) *ConnReturn {
	l, _ := ctx.Value(connReturnKey{}).(*ConnReturn)
	return l
}
