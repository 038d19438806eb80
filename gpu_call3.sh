S=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
nvidia-smi -L
for v in base cdt; do
  opt=""; [ $v = cdt ] && opt='--inductor-options {"coordinate_descent_tuning":true}'
  timeout 280 python3 benchmarks/train_step.py --cases hybrid_fast_b4t4096 $opt --out $OUT/step_$v.json > $OUT/step_$v.log 2>&1; echo $v rc $? $(( $(date +%s)-S ))s
  grep -E "^hybrid" $OUT/step_$v.log | cut -c1-300
done
