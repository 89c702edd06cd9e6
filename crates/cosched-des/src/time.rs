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
}

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
}
