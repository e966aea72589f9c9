#!/usr/bin/env bash
# png-plot.sh OUT.png [kind=line|bar] [logx=1] [logy=1] [title=...] [xlabel=...] [ylabel=...]:
# the PNG twin of scripts/svg-plot.awk, drawn by gnuplot (Debian gnuplot-nox, which
# scripts/install-deps.sh installs) from the same data on stdin:
#   kind=line (default): lines "SERIES X Y", a line with points per series
#   kind=bar:            lines "GROUP SERIES Y", clustered bars, a cluster per group
# Exits 1 when gnuplot is missing or fails (the caller keeps its SVG).
set -u
out=$1
shift
kind=line logx=0 logy=0 title="" xlabel="" ylabel=""
for a in "$@"; do
	case $a in
	kind=* | logx=* | logy=* | title=* | xlabel=* | ylabel=*) declare "$a" ;;
	*) echo "png-plot: unknown argument $a" >&2; exit 2 ;;
	esac
done
command -v gnuplot >/dev/null 2>&1 || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gice-png-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
q() { printf '%s' "$1" | sed 's/"/\\"/g'; } # a gnuplot double-quoted string
{
	echo "set terminal pngcairo size 720,440 font 'sans,10' noenhanced"
	echo "set output \"$(q "$out")\""
	echo "set title \"$(q "$title")\""
	echo "set xlabel \"$(q "$xlabel")\""
	echo "set ylabel \"$(q "$ylabel")\""
	echo "set key outside right"
	echo "set grid"
} >"$tmp/plot.gp"
if [ "$kind" = bar ]; then
	# a table: one row per group, one column per series (in order of appearance), - when missing
	awk 'NF >= 3 { if (!($1 in gi)) g[++ng] = $1; gi[$1] = 1
		if (!($2 in si)) s[++ns] = $2; si[$2] = 1; v[$1, $2] = $3 }
		END { printf "group"; for (j = 1; j <= ns; j++) printf " \"%s\"", s[j]; print ""
		for (i = 1; i <= ng; i++) { printf "\"%s\"", g[i]
			for (j = 1; j <= ns; j++) printf " %s", ((g[i], s[j]) in v) ? v[g[i], s[j]] : "-"; print "" } }' \
		>"$tmp/table"
	n=$(head -1 "$tmp/table" | awk '{ print NF }')
	[ "$n" -ge 2 ] || exit 1
	{
		echo "set style data histograms; set style histogram clustered; set style fill solid 0.8"
		echo "set yrange [0:*]; set offsets 0, 0, graph 0.08, 0; set datafile missing '-'"
		echo "plot for [i=2:$n] \"$tmp/table\" using i:xtic(1) title columnheader(i)"
	} >>"$tmp/plot.gp"
else
	# a file per series, its points in X order
	awk -v d="$tmp" 'NF >= 3 && (!'"$logx"' || $2 > 0) && (!'"$logy"' || $3 > 0) {
		if (!($1 in si)) { si[$1] = ++ns; print $1 > (d "/names") }
		print $2, $3 | ("sort -g > \"" d "/s" si[$1] "\"") }' || exit 1
	[ -s "$tmp/names" ] || exit 1
	[ "$logx" = 1 ] && echo "set logscale x" >>"$tmp/plot.gp"
	[ "$logy" = 1 ] && echo "set logscale y" >>"$tmp/plot.gp"
	i=0 cmd=""
	while IFS= read -r name; do
		i=$((i + 1))
		cmd="$cmd${cmd:+, }\"$tmp/s$i\" using 1:2 with linespoints title \"$(q "$name")\""
	done <"$tmp/names"
	echo "plot $cmd" >>"$tmp/plot.gp"
fi
gnuplot "$tmp/plot.gp" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
[ -s "$out" ]
