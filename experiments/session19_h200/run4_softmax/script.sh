mkdir -p /tmp/r4; cd /tmp/r4
S=softmax.comp
for d in "$S:ONLINE_CHUNK=8" "$S:ONLINE=0,$S:SH_ROW=0,$S:ROW_REGS=64" "$S:ROW_REGS=55,$S:SH_ROW=9" "$S:ROW_REGS=40,$S:SH_ROW=9" "$S:ROW_REGS=0,$S:SH_ROW=0,$S:ONLINE_CHUNK=16" "$S:ROW_REGS=0,$S:SH_ROW=0,$S:ONLINE_CHUNK=32"; do
  f="s_$(echo $d | tr -c 'A-Za-z0-9_=\n' '_').txt"
  strata bench --no-cache --arch flux --size 2048 --reps 3 --warmup 1 --profile --profile-slowest 60 --kernel-define "$d" > "$f" 2>&1
  echo "$d: $(grep -h 'softmax  ' "$f" | head -1) $(grep -h 'device-resident' "$f" | cut -c1-40) $(grep -h 'rror' "$f" | head -2)"
done
tar czf $OUT/r4.tgz *.txt
