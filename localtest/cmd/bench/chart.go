package main

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// chart draws the p50 and p99 latency of each DynamoDB scenario as bars.
func chart(r Report, path string) error {
	p := plot.New()
	p.Title.Text = "dedupe: latency per request against " + r.Server
	p.Y.Label.Text = "ms"
	var p50, p99 plotter.Values
	var names []string
	for _, l := range r.Latency {
		p50 = append(p50, l.P50ms)
		p99 = append(p99, l.P99ms)
		names = append(names, l.Name)
	}
	w := vg.Points(14)
	b50, err := plotter.NewBarChart(p50, w)
	if err != nil {
		return err
	}
	b50.Offset = -w / 2
	b50.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	b99, err := plotter.NewBarChart(p99, w)
	if err != nil {
		return err
	}
	b99.Offset = w / 2
	b99.Color = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	b99.LineStyle.Width = vg.Length(0)
	p.Add(b50, b99)
	p.Legend.Add("p50", b50)
	p.Legend.Add("p99", b99)
	p.Legend.Top = true
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.5
	p.X.Tick.Label.XAlign = -1
	return p.Save(10*vg.Inch, 6*vg.Inch, path)
}
