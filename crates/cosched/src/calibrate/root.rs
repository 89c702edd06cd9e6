//! The one root finder of the calibration's one-parameter solves (compute per
//! iteration, halo size, load imbalance).
//!
//! Each evaluation is a simulated run, so the finder spends few of them: secant
//! steps from two points, then bisection of the bracket of evaluated points where
//! the secant stalls (a response with steps or plateaus, e.g. when messages start
//! to queue at a receiving NIC). The parameter is an integer (ns, bytes, ppm) and an
//! evaluation can fail, which the float-only, infallible closures of the `roots`
//! crate (0.0.8) do not allow; hence this function.

/// One point evaluated: the parameter and what the run gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Point<V> {
    pub x: i64,
    pub v: V,
}

/// What to solve: `residual(v)` is non-decreasing in x and zero at the root (its
/// secant steps aim there); `error(v) >= 0` is the distance to the target that
/// `tolerance` bounds and that ranks points; x stays in `[0, max]` (`max: None`: no
/// upper bound, and no evaluation at the bound).
pub(crate) struct Problem<R, E> {
    pub residual: R,
    pub error: E,
    pub tolerance: f64,
    pub max: Option<i64>,
}

/// Finds x with `error <= tolerance`, from `first` (already evaluated, not a
/// candidate answer: the caller has checked it) and a probe `second`:
/// 1. secant steps on the residual through the last two points (at most 12; stop
///    when within tolerance, when the slope is not positive, or when a step rounds
///    to the point it starts from);
/// 2. if no point lies on the far side of the root, the upper bound, if any;
/// 3. bisection of the bracket (largest x below the root, smallest at or above it)
///    to one unit (at most 24 steps).
///
/// Returns the point of least error evaluated from `second` on.
pub(crate) fn find_root<V: Copy, R, E, F, Err>(
    problem: &Problem<R, E>,
    first: Point<V>,
    second: i64,
    mut eval: F,
) -> Result<Point<V>, Err>
where
    R: Fn(&V) -> f64,
    E: Fn(&V) -> f64,
    F: FnMut(i64) -> Result<V, Err>,
{
    let clamp = |x: f64| {
        let hi = problem.max.map_or(i64::MAX as f64, |m| m as f64);
        x.round().clamp(0.0, hi) as i64
    };
    let r = |p: &Point<V>| (problem.residual)(&p.v);
    let err = |p: &Point<V>| (problem.error)(&p.v);
    let done = |p: &Point<V>| err(p) <= problem.tolerance;
    let mut below = first;
    let mut above: Option<Point<V>> = None;
    let bracket = |p: Point<V>, below: &mut Point<V>, above: &mut Option<Point<V>>| {
        if r(&p) < 0.0 {
            if p.x > below.x {
                *below = p;
            }
        } else if above.is_none_or(|q| p.x < q.x) {
            *above = Some(p);
        }
    };
    let second = Point {
        x: clamp(second as f64),
        v: eval(clamp(second as f64))?,
    };
    let (mut a, mut b) = (first, second);
    let mut best = b;
    bracket(b, &mut below, &mut above);
    for _ in 0..12 {
        if done(&b) {
            break;
        }
        let slope = (r(&b) - r(&a)) / (b.x - a.x) as f64;
        if !(slope.is_finite() && slope > 0.0) {
            break;
        }
        let x = clamp(b.x as f64 - r(&b) / slope);
        if x == b.x {
            break;
        }
        a = b;
        b = Point { x, v: eval(x)? };
        if err(&b) < err(&best) {
            best = b;
        }
        bracket(b, &mut below, &mut above);
    }
    if let Some(max) = problem.max {
        if above.is_none() && !done(&best) && below.x < max {
            let p = Point {
                x: max,
                v: eval(max)?,
            };
            if err(&p) < err(&best) {
                best = p;
            }
            bracket(p, &mut below, &mut above);
        }
    }
    for _ in 0..24 {
        if done(&best) {
            break;
        }
        let Some(hi) = above else { break };
        if hi.x <= below.x + 1 {
            break;
        }
        let x = below.x + (hi.x - below.x) / 2;
        let p = Point { x, v: eval(x)? };
        if err(&p) < err(&best) {
            best = p;
        }
        bracket(p, &mut below, &mut above);
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(target: f64, max: Option<i64>) -> Problem<impl Fn(&f64) -> f64, impl Fn(&f64) -> f64> {
        Problem {
            residual: move |v: &f64| v - target,
            error: move |v: &f64| (v - target).abs(),
            tolerance: 0.5,
            max,
        }
    }

    #[test]
    fn an_affine_response_is_solved_by_the_first_secant_step() {
        // f(x) = 3x + 10, target 1000: the line through (0, 10) and (100, 310) meets it
        // at x = 330 exactly; three evaluations in all.
        let mut calls = Vec::new();
        let got = find_root::<f64, _, _, _, ()>(
            &problem(1000.0, None),
            Point { x: 0, v: 10.0 },
            100,
            |x| {
                calls.push(x);
                Ok(3.0 * x as f64 + 10.0)
            },
        )
        .unwrap();
        assert_eq!(got, Point { x: 330, v: 1000.0 });
        assert_eq!(calls, vec![100, 330]);
    }

    #[test]
    fn a_plateau_stalls_the_secant_and_bisection_finds_the_step() {
        // f = 0 up to x = 300, then 1 per unit: from (0, 0) and a probe at 100 (also
        // 0) the slope is 0, the secant stops; the bound (1000, 700) closes the bracket
        // and bisection ends at 350 (f = 50, the target).
        let f = |x: i64| if x <= 300 { 0.0 } else { (x - 300) as f64 };
        let got = find_root::<f64, _, _, _, ()>(
            &problem(50.0, Some(1000)),
            Point { x: 0, v: 0.0 },
            100,
            |x| Ok(f(x)),
        )
        .unwrap();
        assert_eq!(got.x, 350);
        // Without a bound nothing closes the bracket: the best point is returned.
        let open = find_root::<f64, _, _, _, ()>(
            &problem(50.0, None),
            Point { x: 0, v: 0.0 },
            100,
            |x| Ok(f(x)),
        )
        .unwrap();
        assert_eq!(open, Point { x: 100, v: 0.0 });
    }

    #[test]
    fn an_evaluation_error_is_returned() {
        let got = find_root::<f64, _, _, _, &str>(
            &problem(50.0, None),
            Point { x: 0, v: 0.0 },
            100,
            |x| if x == 100 { Err("run failed") } else { Ok(0.0) },
        );
        assert_eq!(got, Err("run failed"));
    }
}
