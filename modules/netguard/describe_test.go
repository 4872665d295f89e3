package netguard

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestDescribeNamesNoAddress checks that the words shown to callers for a failed outbound
// connection never carry the resolved address, the resolver's address or a port (issue 14.11).
func TestDescribeNamesNoAddress(t *testing.T) {
	dial := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://hooks.example.com/x", Err: &net.OpError{Op: "dial", Net: "tcp",
			Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8443}, Err: err}}
	}
	dns := func(notFound, timeout bool) error {
		return &url.Error{Op: "Post", URL: "https://hooks.example.com/x", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "no such host", Name: "hooks.example.com", Server: "10.0.0.2:53", IsNotFound: notFound, IsTimeout: timeout}}}
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"blocked", fmt.Errorf("%w: %s", ErrBlockedAddress, "10.1.2.3"), "special-purpose address"},
		{"unknown host", dns(true, false), "does not resolve"},
		{"dns timeout", dns(false, true), "host name lookup"},
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), "refused"},
		{"reset", dial(os.NewSyscallError("read", syscall.ECONNRESET)), "reset"},
		{"unreachable", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), "unreachable"},
		{"closed early", &url.Error{Op: "Post", URL: "https://h/", Err: io.EOF}, "closed"},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "trusted"},
		{"wrong host", &tls.CertificateVerificationError{Err: x509.HostnameError{Host: "10.1.2.3"}}, "not valid for"},
		{"not tls", dial(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), "TLS"},
		{"other", dial(errors.New("something at 10.1.2.3:8443 via 10.0.0.2:53")), "connection failed"},
	}
	for _, tt := range tests {
		got := Describe(tt.err)
		if !strings.Contains(got, tt.want) {
			t.Errorf("%s: Describe = %q, want it to say %q", tt.name, got, tt.want)
		}
		for _, leak := range []string{"10.1.2.3", "10.0.0.2", ":53", "8443"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: Describe = %q shows %s", tt.name, got, leak)
			}
		}
	}
}
