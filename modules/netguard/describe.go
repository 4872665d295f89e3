package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Describe says in words what went wrong with an outbound request (an http.request call, a
// webhook delivery), for error text shown to callers. It never repeats the error's own text:
// that names the address a host name resolved to and the DNS resolver's address, which map
// the service's network for whoever chose the URL.
func Describe(err error) string {
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
	)
	switch {
	case errors.Is(err, ErrBlockedAddress):
		return "the destination resolves to a loopback, private, link-local or other special-purpose address"
	case errors.As(err, &dnsErr):
		return describeDNS(dnsErr)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "the connection timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was reset by the other side"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the destination is unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection was closed before a complete response"
	case errors.As(err, &certErr):
		return describeCertificate(certErr.Err)
	case errors.As(err, &recErr):
		return "the destination does not speak TLS"
	case errors.As(err, &alert):
		return "the TLS handshake failed"
	}
	return "the connection failed"
}

func describeDNS(e *net.DNSError) string {
	switch {
	case e.IsNotFound:
		return "the host name does not resolve"
	case e.IsTimeout:
		return "the host name lookup timed out"
	}
	return "the host name could not be resolved"
}

func describeCertificate(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		return "the destination's TLS certificate is not signed by a trusted authority"
	case errors.As(err, &hostname):
		return "the destination's TLS certificate is not valid for its host name"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the destination's TLS certificate has expired or is not yet valid"
	}
	return "the destination's TLS certificate could not be verified"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
