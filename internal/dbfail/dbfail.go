// Package dbfail tells a database that cannot be reached from a request that went wrong, in
// one place: the HTTP error mapping answers the first 503 with Retry-After (docs/operations.md)
// and the second whatever its own kind says.
package dbfail

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/switchyard/switchyard/domain"
)

// Unavailable reports whether err means the database cannot be reached for now: a refused or
// lost connection, a server shutting down or starting up, too many connections, a closed pool,
// or anything wrapping domain.ErrUnavailable (how other stores report the same). A request
// that failed this way did nothing or is safe to retry with its idempotency key; every other
// error, including the caller's own cancellation, is left to its own mapping.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, domain.ErrUnavailable) || errors.Is(err, puddle.ErrClosedPool) || errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return unavailableState(pg.Code)
	}
	if pgconn.Timeout(err) {
		return true // a server that stopped answering; the caller's own cancellation is not a timeout
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// unavailableState reports the SQLSTATEs of a server that cannot serve now but will: class 08
// (connection exception), 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now,
// 53300 too_many_connections.
func unavailableState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "53300":
		return true
	}
	return len(code) == 5 && code[:2] == "08"
}
