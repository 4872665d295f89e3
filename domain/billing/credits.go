package billing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/domain"
)

// Credits is an amount of credits in thousandths. Money must add up exactly, so amounts are
// integers internally; on the wire they are JSON numbers with up to three decimals (1.5).
type Credits int64

// Milli is the number of Credits units in one credit.
const Milli = 1000

// FromWhole converts whole credits.
func FromWhole(n int64) Credits { return Credits(n * Milli) }

// Float is the amount in credits, for display.
func (c Credits) Float() float64 { return float64(c) / Milli }

// String renders the amount as a decimal with no trailing zeros ("12", "0.5").
func (c Credits) String() string {
	sign := ""
	v := int64(c)
	if v < 0 {
		sign, v = "-", -v
	}
	whole, frac := v/Milli, v%Milli
	if frac == 0 {
		return sign + strconv.FormatInt(whole, 10)
	}
	return sign + strings.TrimRight(fmt.Sprintf("%d.%03d", whole, frac), "0")
}

// MarshalJSON writes the amount as a JSON number.
func (c Credits) MarshalJSON() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalJSON reads a JSON number with at most three decimals.
func (c *Credits) UnmarshalJSON(b []byte) error {
	v, err := ParseCredits(string(bytes.TrimSpace(b)))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// ParseCredits reads a decimal amount such as "10", "0.25" or "1e3"; more than three decimals
// is an error rather than a silent rounding.
func ParseCredits(s string) (Credits, error) {
	var n json.Number = json.Number(s)
	f, err := n.Float64()
	if err != nil {
		return 0, domain.Invalid("amount", "must be a number")
	}
	m := f * Milli
	if math.IsNaN(m) || math.IsInf(m, 0) || math.Abs(m) > 9e15 {
		return 0, domain.Invalid("amount", "is out of range")
	}
	r := math.Round(m)
	if math.Abs(m-r) > 1e-6 {
		return 0, domain.Invalid("amount", "must have at most three decimals")
	}
	return Credits(r), nil
}
