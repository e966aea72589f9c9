# svg-plot.awk: a small SVG chart from whitespace-separated data on stdin, with nothing but awk
# (scripts/compare.sh draws its plots with it).
#   kind=line (default): lines "SERIES X Y", a polyline per series, points in X order;
#                        logx=1 / logy=1 for log scales (values <= 0 dropped there)
#   kind=bar:            lines "GROUP SERIES Y", per group (in order of appearance) a bar per
#                        series, y from 0
# Variables: title, xlabel, ylabel. Series are coloured in order of appearance, with a legend.
# Prints the SVG document on stdout; with no data, a chart saying "no data".
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); return s }
function tx(v) { v = logx ? log(v) / log(10) : v; return L + (v - x0) / (x1 - x0) * PW }
function ty(v) { v = logy ? log(v) / log(10) : v; return T + PH - (v - y0) / (y1 - y0) * PH }
function num(v) { return v >= 1e6 || (v > 0 && v < 0.01) ? sprintf("%.0e", v) : (v == int(v) ? sprintf("%d", v) : sprintf("%.2g", v)) }
function bytes(v) { return v >= 1e6 ? (v / 1e6) "M" : v >= 1e3 ? (v / 1e3) "k" : v "" } # decimal: the ticks are powers of 10
BEGIN {
	W = 720; H = 440; L = 80; R = 170; T = 40; B = 60; PW = W - L - R; PH = H - T - B
	split("#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #7f7f7f", color, " ")
	if (kind == "") kind = "line"
}
NF >= 3 {
	if (kind == "bar") {
		g = $1; s = $2; y = $3 + 0
		if (!(g in gi)) { gi[g] = ++ng; gname[ng] = g }
		if (!(s in si)) { si[s] = ++ns; sname[ns] = s }
		val[gi[g], si[s]] = y; has[gi[g], si[s]] = 1
		if (y > ymax) ymax = y
		n++
		next
	}
	s = $1; x = $2 + 0; y = $3 + 0
	if ((logx && x <= 0) || (logy && y <= 0)) next
	if (!(s in si)) { si[s] = ++ns; sname[ns] = s }
	k = si[s]; np[k]++; px[k, np[k]] = x; py[k, np[k]] = y
	if (!n || x < xmin) xmin = x; if (!n || x > xmax) xmax = x
	if (!n || y < ymin) ymin = y; if (!n || y > ymax) ymax = y
	n++
}
END {
	printf "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H
	printf "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H
	printf "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n", L + PW / 2, esc(title)
	if (!n) {
		printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no data</text>\n</svg>\n", L + PW / 2, T + PH / 2
		exit
	}
	# y range (and x for lines): log scales in decades, linear from 0 with 5 steps
	if (kind == "bar") { logy = 0; ymin = 0 }
	if (logy) { y0 = int(log(ymin) / log(10) + 100) - 100; y1 = -int(-log(ymax) / log(10) + 100) + 100; if (y1 <= y0) y1 = y0 + 1 }
	else { y0 = 0; y1 = ymax > 0 ? ymax * 1.1 : 1 }
	if (kind == "line") {
		if (logx) { x0 = int(log(xmin) / log(10) + 100) - 100; x1 = -int(-log(xmax) / log(10) + 100) + 100; if (x1 <= x0) x1 = x0 + 1 }
		else { x0 = xmin < 0 ? xmin : 0; x1 = xmax > x0 ? xmax : x0 + 1 }
	}
	printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"black\"/>\n", L, T, PW, PH
	for (i = 0; i <= (logy ? y1 - y0 : 5); i++) { # y grid and labels
		v = logy ? 10 ^ (y0 + i) : y1 * i / 5
		y = logy ? ty(v) : T + PH - PH * i / 5
		printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y, L + PW, y
		printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 6, y + 4, num(v)
	}
	if (kind == "line")
		for (i = 0; i <= (logx ? x1 - x0 : 5); i++) { # x grid and labels
			v = logx ? 10 ^ (x0 + i) : x0 + (x1 - x0) * i / 5
			x = tx(v)
			printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, T, x, T + PH
			printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, T + PH + 18, (xlabel ~ /bytes/ ? bytes(v) : num(v))
		}
	printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", L + PW / 2, H - 14, esc(xlabel)
	printf "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">%s</text>\n", T + PH / 2, T + PH / 2, esc(ylabel)
	if (kind == "line")
		for (k = 1; k <= ns; k++) {
			for (i = 2; i <= np[k]; i++) # sort the series' points by x (few points: insertion)
				for (j = i; j > 1 && px[k, j - 1] > px[k, j]; j--) {
					t = px[k, j]; px[k, j] = px[k, j - 1]; px[k, j - 1] = t
					t = py[k, j]; py[k, j] = py[k, j - 1]; py[k, j - 1] = t
				}
			c = color[(k - 1) % 8 + 1]
			printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c
			for (i = 1; i <= np[k]; i++) printf "%s%.1f,%.1f", (i > 1 ? " " : ""), tx(px[k, i]), ty(py[k, i])
			printf "\"/>\n"
			for (i = 1; i <= np[k]; i++)
				printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %s: %s</title></circle>\n", tx(px[k, i]), ty(py[k, i]), c, esc(sname[k]), px[k, i], py[k, i]
		}
	else {
		gw = PW / ng; bw = gw * 0.8 / ns
		for (g = 1; g <= ng; g++) {
			printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", L + gw * (g - 0.5), T + PH + 18, esc(gname[g])
			for (k = 1; k <= ns; k++) {
				if (!has[g, k]) continue
				y = ty(val[g, k]); x = L + gw * (g - 1) + gw * 0.1 + bw * (k - 1)
				printf "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s %s: %s</title></rect>\n", x, y, bw, T + PH - y, color[(k - 1) % 8 + 1], esc(gname[g]), esc(sname[k]), val[g, k]
			}
		}
	}
	for (k = 1; k <= ns; k++) { # legend
		y = T + 10 + 20 * (k - 1)
		printf "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/>\n", L + PW + 12, y, color[(k - 1) % 8 + 1]
		printf "<text x=\"%d\" y=\"%d\">%s</text>\n", L + PW + 32, y + 10, esc(sname[k])
	}
	printf "</svg>\n"
}
