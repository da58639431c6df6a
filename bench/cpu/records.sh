# Sourced by the CPU bench scripts: write_records OUT BENCH MODEL writes the JSON file OUT with
# the bench's name, its model, the machine's cores, the date, the commit, and the records the
# script collected in the array `records` (one JSON object each, with its exact command).
write_records() {
  local out=$1 bench=$2 model=$3 k sep
  {
    echo "{"
    echo "  \"bench\": \"$bench\","
    echo "  \"model\": \"$model\","
    echo "  \"machine_cores\": $(nproc),"
    echo "  \"date\": \"$(date -u +%Y-%m-%d)\","
    echo "  \"git\": \"$(git rev-parse --short HEAD)\","
    echo "  \"results\": ["
    for k in "${!records[@]}"; do
      sep=","; (( k == ${#records[@]} - 1 )) && sep=""
      echo "    ${records[$k]}$sep"
    done
    echo "  ]"
    echo "}"
  } > "$out"
  echo "wrote $out" >&2
}
