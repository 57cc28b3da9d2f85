package bigtool

import (
	"bufio"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"strconv"
	"time"
)

// rng is SplitMix64. It is used instead of math/rand because its output is
// fixed by this file alone: a seed names the same bytes in every release and
// on every Go version, so tests and demos can compare checksums.
type rng struct{ s uint64 }

// newRNG returns a generator for one (seed, stream) pair; streams let row i
// be generated without generating rows 0..i-1.
func newRNG(seed int64, stream uint64) *rng {
	r := &rng{s: uint64(seed)*0x9e3779b97f4a7c15 ^ (stream+1)*0xd1b54a32d192ed03}
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n). The modulo bias is irrelevant for demo data.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// Order is one row of the demo order table that query and export_csv return.
type Order struct {
	ID        string  `json:"id"`
	Customer  string  `json:"customer"`
	Region    string  `json:"region"`
	Country   string  `json:"country"`
	Product   string  `json:"product"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unit_price"`
	Amount    float64 `json:"amount"`
	Date      string  `json:"date"`
	Status    string  `json:"status"`

	amountCents int64
}

// OrderColumns are the column names of an Order, in JSON and CSV order.
var OrderColumns = []string{"id", "customer", "region", "country", "product", "quantity", "unit_price", "amount", "date", "status"}

var (
	customerFirst = []string{"Northwind", "Blue Harbor", "Acme", "Contoso", "Globex", "Initech", "Umbrella", "Stark", "Wayne", "Tyrell",
		"Cyberdyne", "Hooli", "Vandelay", "Soylent", "Wonka", "Gringotts", "Monarch", "Oscorp", "Pied Piper", "Massive Dynamic"}
	customerLast = []string{"Traders", "Logistics", "Foods", "Industries", "Holdings", "Labs", "Retail", "Systems", "Partners", "Supply",
		"Manufacturing", "Outfitters", "Pharma", "Energy", "Media", "Robotics", "Textiles", "Analytics", "Freight", "Markets"}
	regions   = []string{"EMEA", "AMER", "APAC"}
	countries = map[string][]string{
		"EMEA": {"DE", "FR", "GB", "NL", "SE", "ES", "IT", "PL", "ZA", "AE"},
		"AMER": {"US", "US", "US", "CA", "BR", "MX", "AR", "CL"},
		"APAC": {"JP", "AU", "IN", "SG", "KR", "NZ", "ID"},
	}
	products = []struct {
		name  string
		cents int64
	}{
		{"USB-C cable 2m", 1299}, {"Laptop stand", 4599}, {"Mechanical keyboard", 12900}, {"27in monitor", 32900},
		{"Noise-cancelling headset", 19900}, {"Webcam 4K", 14900}, {"Docking station", 22900}, {"Ergonomic chair", 49900},
		{"Standing desk", 69900}, {"Wireless mouse", 3999}, {"Label printer", 8999}, {"Barcode scanner", 11900},
		{"Pallet jack", 38900}, {"Safety gloves (box)", 2499}, {"Thermal paper roll", 599}, {"Shipping boxes (50)", 4199},
	}
	statuses = []string{"delivered", "delivered", "delivered", "delivered", "delivered", "delivered",
		"shipped", "shipped", "processing", "cancelled", "returned", "delivered"}
	epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

// NewOrder returns row i (0-based) of the order table for seed. The same
// (seed, i) always gives the same row.
func NewOrder(seed int64, i int) Order {
	r := newRNG(seed, uint64(i))
	c := r.intn(len(customerFirst) * len(customerLast))
	region := regions[r.intn(len(regions))]
	cs := countries[region]
	p := products[r.intn(len(products))]
	qty := 1 + r.intn(12)
	if r.intn(10) == 0 {
		qty *= 10 // the occasional bulk order keeps the amount column interesting
	}
	// Prices drift by up to ±15% around list price, in whole cents.
	unit := p.cents + (p.cents*int64(r.intn(31)-15))/100
	amount := unit * int64(qty)
	return Order{
		ID:          fmt.Sprintf("ORD-%08d", i+1),
		Customer:    customerFirst[c%len(customerFirst)] + " " + customerLast[c/len(customerFirst)],
		Region:      region,
		Country:     cs[r.intn(len(cs))],
		Product:     p.name,
		Quantity:    qty,
		UnitPrice:   float64(unit) / 100,
		Amount:      float64(amount) / 100,
		Date:        epoch.AddDate(0, 0, r.intn(365)).Format(time.DateOnly),
		Status:      statuses[r.intn(len(statuses))],
		amountCents: amount,
	}
}

// Summary describes a generated order table. It is the structuredContent of
// the query tool: small, so it stays inline when the rows are offloaded.
type Summary struct {
	Rows           int                `json:"rows" jsonschema:"number of rows returned"`
	Bytes          int64              `json:"bytes" jsonschema:"size in bytes of the rows as returned (the JSON text content, or the CSV)"`
	SHA256         string             `json:"sha256" jsonschema:"SHA-256 of those bytes, lower-case hex: compare it with a fetched link's checksum"`
	Columns        []string           `json:"columns" jsonschema:"column names, in order"`
	TotalAmount    float64            `json:"total_amount" jsonschema:"sum of the amount column"`
	AmountByRegion map[string]float64 `json:"amount_by_region" jsonschema:"sum of the amount column per region"`
	FirstDate      string             `json:"first_date,omitempty" jsonschema:"earliest order date (YYYY-MM-DD)"`
	LastDate       string             `json:"last_date,omitempty" jsonschema:"latest order date (YYYY-MM-DD)"`
}

// summarizer accumulates a Summary while rows are written.
type summarizer struct {
	s        Summary
	total    int64
	byRegion map[string]int64
	h        hash.Hash
	n        int64
}

func newSummarizer() *summarizer {
	return &summarizer{byRegion: map[string]int64{}, h: sha256.New()}
}

func (z *summarizer) Write(p []byte) (int, error) {
	z.n += int64(len(p))
	return z.h.Write(p)
}

func (z *summarizer) add(o Order) {
	z.s.Rows++
	z.total += o.amountCents
	z.byRegion[o.Region] += o.amountCents
	if z.s.FirstDate == "" || o.Date < z.s.FirstDate {
		z.s.FirstDate = o.Date
	}
	if o.Date > z.s.LastDate {
		z.s.LastDate = o.Date
	}
}

func (z *summarizer) summary() Summary {
	s := z.s
	s.Bytes = z.n
	s.SHA256 = hex.EncodeToString(z.h.Sum(nil))
	s.Columns = append([]string(nil), OrderColumns...)
	s.TotalAmount = float64(z.total) / 100
	s.AmountByRegion = map[string]float64{}
	for k, v := range z.byRegion {
		s.AmountByRegion[k] = float64(v) / 100
	}
	return s
}

// WriteJSON writes rows orders for seed to w as a JSON array of objects, one
// object per line, and returns the summary of what it wrote. Output is
// deterministic: the same (seed, rows) gives the same bytes.
func WriteJSON(w io.Writer, seed int64, rows int) (Summary, error) {
	z := newSummarizer()
	bw := bufio.NewWriterSize(io.MultiWriter(w, z), 64<<10)
	bw.WriteString("[")
	for i := range rows {
		o := NewOrder(seed, i)
		b, err := json.Marshal(o)
		if err != nil {
			return Summary{}, err
		}
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n  ")
		bw.Write(b)
		z.add(o)
	}
	bw.WriteString("\n]\n")
	if err := bw.Flush(); err != nil {
		return Summary{}, err
	}
	return z.summary(), nil
}

// WriteCSV writes the same rows as WriteJSON as RFC 4180 CSV with a header
// line, and returns the summary of what it wrote.
func WriteCSV(w io.Writer, seed int64, rows int) (Summary, error) {
	z := newSummarizer()
	bw := bufio.NewWriterSize(io.MultiWriter(w, z), 64<<10)
	cw := csv.NewWriter(bw)
	cw.Write(OrderColumns)
	rec := make([]string, len(OrderColumns))
	for i := range rows {
		o := NewOrder(seed, i)
		rec[0], rec[1], rec[2], rec[3], rec[4] = o.ID, o.Customer, o.Region, o.Country, o.Product
		rec[5] = strconv.Itoa(o.Quantity)
		rec[6] = strconv.FormatFloat(o.UnitPrice, 'f', 2, 64)
		rec[7] = strconv.FormatFloat(o.Amount, 'f', 2, 64)
		rec[8], rec[9] = o.Date, o.Status
		cw.Write(rec)
		z.add(o)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return Summary{}, err
	}
	if err := bw.Flush(); err != nil {
		return Summary{}, err
	}
	return z.summary(), nil
}
