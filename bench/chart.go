package bench

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// chartVariants are the bars of the chart, in order, with their colours.
var chartVariants = []struct {
	id    string
	color color.RGBA
}{
	{"go-copy", color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff}},
	{"raw-wazero", color.RGBA{R: 0x9e, G: 0xc5, B: 0xe8, A: 0xff}},
	{"raw-wasmtime", color.RGBA{R: 0xf5, G: 0xc2, B: 0x9a, A: 0xff}},
	{"extism", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	{"callbox-wazero", color.RGBA{R: 0x1f, G: 0x5f, B: 0xb4, A: 0xff}},
	{"callbox-wazero:zero-copy", color.RGBA{R: 0x17, G: 0x3a, B: 0x6e, A: 0xff}},
	{"callbox-wasmtime", color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
	{"callbox-wasmtime:zero-copy", color.RGBA{R: 0xa0, G: 0x4b, B: 0x00, A: 0xff}},
}

// WriteChart draws every workload's time relative to native Go on a log
// scale, one bar per variant, and saves it as a PNG (or SVG/PDF, by the
// path's extension).
func (r *Report) WriteChart(path string) error {
	p := plot.New()
	p.Title.Text = "time per operation relative to native Go (log scale; lower is faster)"
	p.Title.Padding = vg.Points(8)
	p.Y.Label.Text = "x native Go"
	p.Y.Tick.Marker = logTicks{}
	var names []string
	for _, wl := range Workloads() {
		names = append(names, chartLabel(wl))
	}
	var present []int
	for i, cv := range chartVariants {
		for _, wl := range Workloads() {
			if r.result(wl.ID, cv.id) != nil {
				present = append(present, i)
				break
			}
		}
	}
	width := vg.Points(9)
	lo, hi := 0.0, 1.0
	for k, i := range present {
		cv := chartVariants[i]
		vals := make(plotter.Values, len(names))
		for j, wl := range Workloads() {
			x := r.ratio(wl.ID, cv.id, "go-native")
			if math.IsNaN(x) || x <= 0 {
				continue // no bar
			}
			vals[j] = math.Log10(x)
			lo, hi = math.Min(lo, vals[j]), math.Max(hi, vals[j])
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.Color = cv.color
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(k)-float64(len(present)-1)/2)
		p.Add(bars)
		name := cv.id
		for _, v := range Variants() {
			if v.ID == cv.id {
				name = v.Name
			}
		}
		p.Legend.Add(name, bars)
	}
	p.Add(plotter.NewGrid())
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4   // room for the outer groups' bars
	p.Y.Min, p.Y.Max = math.Floor(lo), math.Ceil(hi)+1 // room for the legend
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.Padding = vg.Points(1)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.ThumbnailWidth = vg.Points(12)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	return p.Save(14*vg.Inch, 6*vg.Inch, path)
}

func chartLabel(wl Workload) string {
	switch wl.ID {
	case "tiny-1KiB":
		return "tiny 1 KiB"
	case "chain-100":
		return "chain 100 x 1 KiB"
	}
	return wl.Name
}

// logTicks labels log10 values as multiples: 0.1x, 1x, 10x, ...
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(min); e <= math.Ceil(max); e++ {
		x := math.Pow(10, e)
		label := fmt.Sprintf("%gx", x)
		ts = append(ts, plot.Tick{Value: e, Label: label})
		for m := 2.0; m < 10 && e+math.Log10(m) <= max; m++ {
			ts = append(ts, plot.Tick{Value: e + math.Log10(m)})
		}
	}
	return ts
}
