# bench/plot.gp — one line chart from a .dat file written by plot_data.py.
# Variables (gnuplot -e): dat, out, ttl, xl, yl, n (number of series),
# peak (GFLOP/s line to draw, 0 for none), logx (1: log-scale x axis),
# ratio (1: draw the parity line y = 1).
set terminal pngcairo size 900,560 noenhanced font ",10"
set output out
set title ttl
set xlabel xl
set ylabel yl
set grid
set key outside right top
if (logx) set logscale x 2
set yrange [0:*]
if (peak > 0) set arrow from graph 0, first peak to graph 1, first peak nohead dt 2 lc rgb "gray40"; \
    set label sprintf("FP32 peak %.0f", peak) at graph 0.02, first peak offset 0,0.6 tc rgb "gray40"
if (ratio) set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "gray40"
plot for [i=0:n-1] dat index i using 1:2 with linespoints pt 7 ps 0.7 title columnheader(2)
