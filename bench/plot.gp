# bench/plot.gp — one line chart from a .dat file written by plot_data.py.
# Variables (gnuplot -e): dat, out, ttl, xl, yl, n (number of series),
# peak (GFLOP/s drawn as a dashed line, 0 for none), logx (1: log-scale x),
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
# The reference line is plotted as a function so that autoscaling includes it.
ref = peak > 0 ? peak : (ratio ? 1 : NaN)
reftitle = peak > 0 ? sprintf("FP32 peak %.0f", peak) : "parity"
plot for [i=0:n-1] dat index i using 1:2 with linespoints pt 7 ps 0.7 title columnheader(2), \
     (peak > 0 || ratio ? ref : NaN) with lines dt 2 lc rgb "gray40" title (peak > 0 || ratio ? reftitle : "")
