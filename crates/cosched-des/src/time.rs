use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Simulated time in integer nanoseconds. Never derived from the wall clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub i64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(i64::MAX);
    pub const NS_PER_S: i64 = 1_000_000_000;

    pub const fn from_ns(ns: i64) -> Self {
        SimTime(ns)
    }
    pub const fn from_us(us: i64) -> Self {
        SimTime(us * 1_000)
    }
    pub const fn from_ms(ms: i64) -> Self {
        SimTime(ms * 1_000_000)
    }
    pub const fn from_secs(s: i64) -> Self {
        SimTime(s * Self::NS_PER_S)
    }
    /// Rounds a (finite, non-negative or negative) number of seconds to the nearest nanosecond.
    pub fn from_secs_f64(s: f64) -> Self {
        SimTime((s * Self::NS_PER_S as f64).round() as i64)
    }
    pub const fn as_ns(self) -> i64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / Self::NS_PER_S as f64
    }
    pub fn saturating_add(self, d: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }

    /// The largest time, in seconds, accepted from input (trace times, job
    /// tables, configuration times): 2^31 - 1 s, about 68 years, the largest
    /// value SWF traces hold (several use it for an "unlimited" requested time).
    /// `SimTime` itself reaches about 9.2 * 10^9 s; the margin lets a schedule
    /// add waits and stretched run times to input times, and every such sum is
    /// still checked ([`SimTime::checked_add`]).
    pub const INPUT_LIMIT_S: f64 = 2_147_483_647.0;

    /// Converts seconds from input: refuses values that are not finite or whose
    /// magnitude exceeds [`SimTime::INPUT_LIMIT_S`] (the caller names the file,
    /// line and field).
    pub fn try_from_secs_f64(s: f64) -> Result<Self, TimeRangeError> {
        if s.is_finite() && s.abs() <= Self::INPUT_LIMIT_S {
            Ok(Self::from_secs_f64(s))
        } else {
            Err(TimeRangeError { value_s: s })
        }
    }

    /// `self + d`, or `None` when the sum is beyond the representable range.
    pub fn checked_add(self, d: SimTime) -> Option<SimTime> {
        self.0.checked_add(d.0).map(SimTime)
    }

    /// `self - d`, or `None` when the difference is beyond the representable range.
    pub fn checked_sub(self, d: SimTime) -> Option<SimTime> {
        self.0.checked_sub(d.0).map(SimTime)
    }

    /// `self * k`, or `None` when the product is beyond the representable range.
    pub fn checked_mul(self, k: i64) -> Option<SimTime> {
        self.0.checked_mul(k).map(SimTime)
    }

    /// Seconds (any finite `f64`) to a time, or `None` when the value is not
    /// finite or beyond the representable range (about +-9.2 * 10^9 s).
    pub fn checked_from_secs_f64(s: f64) -> Option<SimTime> {
        Self::checked_from_ns_f64(s * Self::NS_PER_S as f64)
    }

    /// Nanoseconds as an `f64` (rounded to the nearest), or `None` when the value
    /// is not finite or beyond the representable range.
    pub fn checked_from_ns_f64(ns: f64) -> Option<SimTime> {
        let ns = ns.round();
        // i64::MAX as f64 rounds up to 2^63, which is itself out of range.
        (ns.is_finite() && ns >= i64::MIN as f64 && ns < i64::MAX as f64)
            .then_some(SimTime(ns as i64))
    }
}

/// A time read from input that is not finite or beyond [`SimTime::INPUT_LIMIT_S`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeRangeError {
    pub value_s: f64,
}

impl fmt::Display for TimeRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            // `{:?}` writes 1e300 as "1e300", not as 301 digits.
            "time {:?} s is outside the supported range (at most {} s, about 68 years)",
            self.value_s,
            SimTime::INPUT_LIMIT_S
        )
    }
}

impl std::error::Error for TimeRangeError {}

impl Add for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimTime) -> SimTime {
        SimTime(self.0 + rhs.0)
    }
}
impl AddAssign for SimTime {
    fn add_assign(&mut self, rhs: SimTime) {
        self.0 += rhs.0;
    }
}
impl Sub for SimTime {
    type Output = SimTime;
    fn sub(self, rhs: SimTime) -> SimTime {
        SimTime(self.0 - rhs.0)
    }
}
impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn conversions() {
        assert_eq!(SimTime::from_secs(2).as_ns(), 2_000_000_000);
        assert_eq!(SimTime::from_ms(3), SimTime::from_us(3000));
        assert_eq!(SimTime::from_secs_f64(1.5).as_ns(), 1_500_000_000);
        assert_eq!(
            (SimTime::from_secs(3) - SimTime::from_secs(1)).as_secs_f64(),
            2.0
        );
    }

    #[test]
    fn input_range_and_checked_arithmetic() {
        let max = SimTime::try_from_secs_f64(2_147_483_647.0).unwrap();
        assert_eq!(max.as_ns(), 2_147_483_647 * SimTime::NS_PER_S);
        for bad in [2_147_483_648.0, -3e9, f64::NAN, f64::INFINITY, 1e300] {
            let e = SimTime::try_from_secs_f64(bad).unwrap_err();
            assert!(e.to_string().contains("outside the supported range"), "{e}");
        }
        // The value is written short, in the form the user would type it.
        let e = SimTime::try_from_secs_f64(1e300).unwrap_err().to_string();
        assert!(e.starts_with("time 1e300 s is outside") && e.len() < 100, "{e}");
        let e = SimTime::try_from_secs_f64(3e9).unwrap_err().to_string();
        assert!(e.starts_with("time 3000000000.0 s is outside"), "{e}");
        assert_eq!(SimTime::MAX.checked_add(SimTime(1)), None);
        assert_eq!(SimTime(1).checked_add(SimTime(2)), Some(SimTime(3)));
        assert_eq!(SimTime(i64::MIN).checked_sub(SimTime(1)), None);
        assert_eq!(SimTime::from_secs(5_000_000_000).checked_mul(2), None);
        assert_eq!(SimTime::checked_from_secs_f64(9.3e9), None);
        assert_eq!(SimTime::checked_from_secs_f64(f64::NAN), None);
        assert_eq!(SimTime::checked_from_secs_f64(2.5), Some(SimTime(2_500_000_000)));
    }
}
