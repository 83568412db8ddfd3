# published.sh - sourced by the placement benchmarks: the published figures
# of Weng et al., ATC '23, for the Alibaba "openb" traces (unallocated GPU %
# at 100% arrival, mean ± sd over 10 seeds; from
# ../shared/traces/alibaba-gpu-v2023/README.md).

published() { # trace -> "FGD BestFit", "- -" when the paper has none
    case $1 in
    default) echo "4.77±0.10 7.14±0.14" ;;
    gpushare40) echo "6.04±0.07 8.56±0.19" ;;
    gpushare60) echo "8.75±0.12 10.94±0.17" ;;
    gpushare80) echo "10.92±0.10 13.34±0.23" ;;
    gpushare100) echo "13.36±0.15 15.38±0.21" ;;
    multigpu20) echo "4.47±0.15 6.27±0.24" ;;
    gpuspec10) echo "5.34±0.18 6.90±0.20" ;;
    cpu050) echo "5.00±0.11 6.44±0.12" ;;
    *) echo "- -" ;;
    esac
}
