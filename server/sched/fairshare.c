/*
 * fairshare.c - fair share over the department -> project tree.
 *
 * At each level (departments and department-less projects share the
 * cluster; projects share their department's fair share):
 *   deserved = min(quota, demand, limit);
 *   when the deserved shares add up to more than there is, each gets the same
 *   fraction of its deserved share (quotas sold beyond the cluster);
 *   otherwise the surplus is water-filled: highest priority first, within a
 *   priority in proportion to over-quota weight, each capped by
 *   min(demand, limit); entities of weight 0 share what the others leave.
 * With a usage half-life set, a project's weight is multiplied by
 * 2^(-U/S): U its share of its siblings' decayed usage, S its share of their
 * weight (Slurm's classic fair-share factor). No rounding to whole GPUs.
 */
#include <math.h>
#include <stdlib.h>

#include "server/sched/sched_int.h"

struct wf {
    double quota, weight, limit, demand;
    int priority;
    double deserved, fair;
};

static void fill_round(struct wf **e, size_t n, double *remaining, bool equal)
{
    /* water-fill *remaining over e[0..n) in proportion to weight (or equally) */
    bool *done = calloc(n ? n : 1, sizeof(bool));
    if (done == NULL)
        return;
    for (;;) {
        double w = 0;
        size_t active = 0;
        for (size_t i = 0; i < n; i++) {
            double want = fmin(e[i]->demand, e[i]->limit) - e[i]->fair;
            if (done[i] || want <= EPS) {
                done[i] = true;
                continue;
            }
            w += equal ? 1.0 : e[i]->weight;
            active++;
        }
        if (active == 0 || *remaining <= EPS || w <= 0)
            break;
        bool capped = false;
        double r = *remaining;
        for (size_t i = 0; i < n; i++) {
            if (done[i])
                continue;
            double want = fmin(e[i]->demand, e[i]->limit) - e[i]->fair;
            double share = r * (equal ? 1.0 : e[i]->weight) / w;
            if (share >= want - EPS) {
                e[i]->fair += want;
                *remaining -= want;
                done[i] = true;
                capped = true;
            }
        }
        if (capped)
            continue;
        for (size_t i = 0; i < n; i++)
            if (!done[i])
                e[i]->fair += r * (equal ? 1.0 : e[i]->weight) / w;
        *remaining = 0;
        break;
    }
    free(done);
}

static int cmp_prio_desc(const void *x, const void *y)
{
    const struct wf *a = *(const struct wf *const *)x, *b = *(const struct wf *const *)y;
    return a->priority > b->priority ? -1 : a->priority < b->priority;
}

static void waterfill(struct wf *e, size_t n, double capacity)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        e[i].deserved = fmax(0, fmin(e[i].quota, fmin(e[i].demand, e[i].limit)));
        sum += e[i].deserved;
    }
    if (sum > capacity + EPS) {
        for (size_t i = 0; i < n; i++)
            e[i].fair = sum > 0 ? e[i].deserved * capacity / sum : 0;
        return;
    }
    for (size_t i = 0; i < n; i++)
        e[i].fair = e[i].deserved;
    double remaining = capacity - sum;
    struct wf **order = malloc((n ? n : 1) * sizeof(*order));
    struct wf **grp = malloc((n ? n : 1) * sizeof(*grp));
    if (order == NULL || grp == NULL) {
        free(order);
        free(grp);
        return;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &e[i];
    /* a stable order: qsort is not stable, so sort on (priority, position) */
    for (size_t i = 1; i < n; i++) {
        struct wf *x = order[i];
        size_t j = i;
        while (j > 0 && cmp_prio_desc(&order[j - 1], &x) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    for (size_t i = 0; i < n && remaining > EPS;) {
        size_t j = i;
        while (j < n && order[j]->priority == order[i]->priority)
            j++;
        size_t ng = 0;
        for (size_t k = i; k < j; k++)
            if (order[k]->weight > 0)
                grp[ng++] = order[k];
        fill_round(grp, ng, &remaining, false);
        ng = 0;
        for (size_t k = i; k < j; k++)
            if (order[k]->weight <= 0)
                grp[ng++] = order[k];
        fill_round(grp, ng, &remaining, true);
        i = j;
    }
    free(order);
    free(grp);
}

double ts_sched_fairshare_usage_factor(double usage, double total_usage, double weight,
                                       double total_weight)
{
    if (total_usage <= 0 || total_weight <= 0 || weight <= 0)
        return 1.0;
    double u = usage / total_usage, s = weight / total_weight;
    return pow(2.0, -u / s);
}

double ts_sched_usage_decay(double usage, double elapsed_s, double half_life_s)
{
    if (half_life_s <= 0 || elapsed_s <= 0)
        return usage;
    return usage * pow(2.0, -elapsed_s / half_life_s);
}

static void apply_usage(struct wf *e, const double *usage, size_t n)
{
    double tu = 0, tw = 0;
    for (size_t i = 0; i < n; i++) {
        tu += usage[i];
        tw += e[i].weight;
    }
    for (size_t i = 0; i < n; i++)
        e[i].weight *= ts_sched_fairshare_usage_factor(usage[i], tu, e[i].weight, tw);
}

void ts_sched_fairshare(const struct ts_sched_department *deps, size_t ndeps,
                        const struct ts_sched_project *projs, size_t nprojs, const double *demand,
                        double capacity, double usage_half_life_s, double *out_deserved,
                        double *out_fair)
{
    /* top level: departments, then department-less projects */
    size_t ntop = ndeps;
    for (size_t i = 0; i < nprojs; i++)
        if (projs[i].department < 0)
            ntop++;
    struct wf *top = calloc(ntop ? ntop : 1, sizeof(*top));
    double *topuse = calloc(ntop ? ntop : 1, sizeof(double));
    int *topof = malloc((nprojs ? nprojs : 1) * sizeof(int));
    struct wf *pe = calloc(nprojs ? nprojs : 1, sizeof(*pe));
    double *puse = calloc(nprojs ? nprojs : 1, sizeof(double));
    size_t *members = malloc((nprojs ? nprojs : 1) * sizeof(size_t));
    if (!top || !topuse || !topof || !pe || !puse || !members)
        goto out;
    for (size_t d = 0; d < ndeps; d++) {
        top[d].quota = deps[d].quota_gpus;
        top[d].weight = deps[d].over_quota_weight;
        top[d].limit = deps[d].has_limit ? deps[d].limit_gpus : INFINITY;
        top[d].priority = deps[d].priority;
    }
    size_t t = ndeps;
    for (size_t i = 0; i < nprojs; i++) {
        const struct ts_sched_project *p = &projs[i];
        pe[i].quota = p->quota_gpus;
        pe[i].weight = p->over_quota_weight;
        pe[i].limit = p->has_limit ? p->limit_gpus : INFINITY;
        pe[i].priority = p->priority;
        pe[i].demand = demand[i];
        puse[i] = p->usage_gpu_seconds;
        if (p->department < 0) {
            topof[i] = (int)t;
            top[t] = pe[i];
            topuse[t] = puse[i];
            t++;
        } else {
            topof[i] = p->department;
            top[p->department].demand += fmin(demand[i], pe[i].limit);
            topuse[p->department] += puse[i];
        }
    }
    if (usage_half_life_s > 0)
        apply_usage(top, topuse, ntop);
    waterfill(top, ntop, capacity);
    for (size_t i = 0; i < nprojs; i++)
        if (projs[i].department < 0) {
            out_deserved[i] = top[topof[i]].deserved;
            out_fair[i] = top[topof[i]].fair;
        }
    for (size_t d = 0; d < ndeps; d++) {
        size_t nm = 0;
        for (size_t i = 0; i < nprojs; i++)
            if (projs[i].department == (int)d)
                members[nm++] = i;
        if (nm == 0)
            continue;
        struct wf *sub = calloc(nm, sizeof(*sub));
        double *su = calloc(nm, sizeof(double));
        if (sub == NULL || su == NULL) {
            free(sub);
            free(su);
            goto out;
        }
        for (size_t k = 0; k < nm; k++) {
            sub[k] = pe[members[k]];
            su[k] = puse[members[k]];
        }
        if (usage_half_life_s > 0)
            apply_usage(sub, su, nm);
        waterfill(sub, nm, top[d].fair);
        for (size_t k = 0; k < nm; k++) {
            out_deserved[members[k]] = sub[k].deserved;
            out_fair[members[k]] = sub[k].fair;
        }
        free(sub);
        free(su);
    }
out:
    free(top);
    free(topuse);
    free(topof);
    free(pe);
    free(puse);
    free(members);
}
