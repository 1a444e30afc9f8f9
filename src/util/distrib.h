/* The normal and Student t distributions, in double precision and accurate in the far tails
 * (the sequential rule's early looks spend levels of 1e-12 and less): CDFs through erfc and
 * the regularized incomplete beta function, quantiles by safeguarded inversion. Pure
 * computation: no allocation, no state, deterministic for a given binary and libm.
 * tests/test_sequential.c checks them against scipy to ~1e-10 relative. */
#ifndef ABLATE_UTIL_DISTRIB_H
#define ABLATE_UTIL_DISTRIB_H

/* Phi(x), the standard normal CDF. */
double distrib_norm_cdf(double x);
/* The standard normal quantile: x with Phi(x) = p, p in (0, 1) (NaN outside). For an upper
 * quantile at a tiny tail probability q use -distrib_norm_quantile(q), never 1 - q. */
double distrib_norm_quantile(double p);

/* I_x(a, b), the regularized incomplete beta function, a, b > 0, x in [0, 1]. */
double distrib_incbeta(double a, double b, double x);

/* P(T <= t) and P(T > t) for Student's t with df > 0 degrees of freedom; the survival
 * function keeps its relative accuracy in the upper tail. */
double distrib_t_cdf(double t, double df);
double distrib_t_sf(double t, double df);
/* The upper quantile: t with P(T > t) = q, q in (0, 1) (NaN outside); the lower quantile at p
 * is -distrib_t_isf(p, df). */
double distrib_t_isf(double q, double df);

#endif
