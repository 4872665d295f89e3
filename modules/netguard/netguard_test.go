package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestIsBlocked(t *testing.T) {
	blocked := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254",
		"127.0.0.1", "127.1.2.3", "169.254.169.254", "169.254.0.1", "172.16.0.1", "172.31.255.255",
		"192.0.0.192", "192.0.2.1", "192.168.1.1", "198.18.0.1", "198.51.100.7", "203.0.113.9",
		"224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
		"fe80::1", "fe80::1%eth0", "fc00::1", "fd00:ec2::254", "fec0::1", "ff02::1", "ff05::2",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1", "2002:a00:1::",
		"2001:db8::1", "100::1",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.15.255.255", "172.32.0.1", "100.63.255.255",
		"100.128.0.1", "169.253.255.255", "192.169.0.1", "::ffff:8.8.8.8",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "64:ff9b::808:808", "2002:808:808::1",
	}
	for _, s := range blocked {
		if !IsBlocked(netip.MustParseAddr(s)) {
			t.Errorf("IsBlocked(%s) = false, want true", s)
		}
	}
	for _, s := range allowed {
		if IsBlocked(netip.MustParseAddr(s)) {
			t.Errorf("IsBlocked(%s) = true, want false", s)
		}
	}
	if !IsBlocked(netip.Addr{}) {
		t.Error("the zero Addr is not blocked")
	}
}

func TestControl(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:80", "10.0.0.1:443", "169.254.169.254:80", "[::1]:80", "[fe80::1%eth0]:80", "not-an-address", "localhost:80"} {
		if err := Control("tcp", addr, nil); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("Control(%s) = %v, want ErrBlockedAddress", addr, err)
		}
	}
	for _, addr := range []string{"8.8.8.8:53", "[2606:4700:4700::1111]:443"} {
		if err := Control("tcp", addr, nil); err != nil {
			t.Errorf("Control(%s) = %v, want nil", addr, err)
		}
	}
}

func TestCheckHost(t *testing.T) {
	for host, blocked := range map[string]bool{
		"127.0.0.1": true, "[::1]": true, "::1": true, "169.254.169.254": true, "10.0.0.1": true,
		"8.8.8.8": false, "example.com": false, "localhost": false, // names are checked when dialled
	} {
		err := CheckHost(host)
		if got := errors.Is(err, ErrBlockedAddress); got != blocked {
			t.Errorf("CheckHost(%s) = %v, want blocked=%v", host, err, blocked)
		}
	}
}

// The guarded dialer refuses blocked destinations in Control, i.e. before
// connect(2): nothing is sent and no timeout is involved.
func TestDialerRefusesBlockedAddresses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())

	d := Dialer(false)
	if d.Control == nil {
		t.Fatal("Dialer(false) has no Control")
	}
	for _, addr := range []string{
		l.Addr().String(),
		net.JoinHostPort("localhost", port), // a name that resolves to loopback
		"10.0.0.1:80",
		"169.254.169.254:80",
		"[::1]:" + port,
		"0.0.0.0:" + port,
	} {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Errorf("dial %s succeeded", addr)
			continue
		}
		if !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("dial %s: %v, want ErrBlockedAddress", addr, err)
		}
	}
	select {
	case <-accepted:
		t.Fatal("a guarded dial reached the listener")
	default:
	}

	// Unguarded, the same listener is reachable.
	c, err := Dialer(true).DialContext(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("Dialer(true): %v", err)
	}
	c.Close()
	<-accepted
}

func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	guarded := &http.Client{Transport: NewTransport(false)}
	if _, err := guarded.Get(srv.URL); !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("guarded GET %s: %v, want ErrBlockedAddress", srv.URL, err)
	}

	open := &http.Client{Transport: NewTransport(true)}
	resp, err := open.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
}
