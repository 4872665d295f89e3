// Package netguard keeps outbound HTTP requests made on behalf of users (the
// http.request module, webhook deliveries) away from the service's own
// network: loopback, private, link-local (including cloud metadata at
// 169.254.169.254), unique-local, CGNAT, multicast, unspecified and other
// special-purpose addresses.
//
// The check runs in [net.Dialer.Control], i.e. on the IP address of the
// socket actually being connected, after DNS resolution. A hostname that
// resolves to a blocked address is therefore refused, and so is a DNS
// rebinding attack (a name that resolves to a public address when a URL is
// validated and to a private one when it is dialled), and so is every
// redirect hop, as long as all connections go through the guarded dialer.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrBlockedAddress is returned (wrapped, test with errors.Is) when a
// connection to a blocked address is refused.
var ErrBlockedAddress = errors.New("netguard: destination address is not allowed")

// blockedPrefixes are the special-purpose ranges refused outright.
// IPv4-mapped IPv6 addresses are unmapped before the check; NAT64 and 6to4
// addresses are checked by the IPv4 address they embed.
var blockedPrefixes = []netip.Prefix{
	// IPv4
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"; 0.0.0.0 reaches localhost on Linux
	netip.MustParsePrefix("10.0.0.0/8"),      // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),   // CGNAT, RFC 6598
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local, cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),   // RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (incl. 192.0.0.192 metadata)
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("192.168.0.0/16"),  // RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, incl. 255.255.255.255 broadcast
	// IPv6
	netip.MustParsePrefix("::/96"),          // unspecified, loopback, deprecated IPv4-compatible
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("fc00::/7"),       // unique-local (incl. fd00:ec2::254 metadata)
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("ff00::/8"),       // multicast
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// IsBlocked reports whether ip must not be connected to on behalf of a user.
// An invalid address is blocked.
func IsBlocked(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.WithZone("").Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64Prefix.Contains(ip):
			return IsBlocked(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixToFour.Contains(ip):
			return IsBlocked(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	return false
}

// Control is a [net.Dialer] Control function that refuses connections to
// blocked addresses. address is the resolved "ip:port" about to be connected;
// anything that does not parse as one is refused too.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %s address %q", ErrBlockedAddress, network, address)
	}
	if IsBlocked(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, ap.Addr().WithZone("").Unmap())
	}
	return nil
}

// Dialer returns a dialer for outbound user-directed connections. Unless
// allowPrivate is true its Control function is [Control], so every
// connection (including each address tried for a multi-address hostname and
// each redirect hop) is checked against [IsBlocked]. allowPrivate=true turns
// the guard off completely; it exists for local development and tests.
func Dialer(allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = Control
	}
	return d
}

// NewTransport returns an HTTP transport whose connections go through
// [Dialer](allowPrivate). It never uses a proxy (a proxy would connect on the
// caller's behalf, out of the guard's sight).
func NewTransport(allowPrivate bool) *http.Transport {
	d := Dialer(allowPrivate)
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    10,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// CheckHost reports whether host (a hostname or IP literal, optionally in
// brackets) is an IP literal that is blocked. Hostnames are not resolved:
// they pass here and are checked at connect time. It is meant for an early,
// friendly rejection at validation time; the dialer remains the real guard.
func CheckHost(host string) error {
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	if IsBlocked(ip) {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, ip.WithZone("").Unmap())
	}
	return nil
}
