//! The policy registry: `name` or `name[key=value,...]` -> a boxed policy.
//!
//! Unknown names and unknown or malformed parameters are errors that list what
//! is valid; nothing here panics on user input.

use cosched_contract::cluster::ClusterPolicy;
use cosched_contract::node::NodePolicy;
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// A parsed policy string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySpec {
    pub name: String,
    pub params: BTreeMap<String, String>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("policy: {0}")]
    Malformed(#[from] cosched_model::spec::SpecError),
    #[error("unknown policy {name:?}; valid policies: {valid}")]
    UnknownPolicy { name: String, valid: String },
    #[error("policy {policy}: unknown parameter {param:?}; valid parameters: {valid}")]
    UnknownParam {
        policy: String,
        param: String,
        valid: String,
    },
    #[error("policy {policy}: parameter {param}={value:?}: {msg}")]
    BadValue {
        policy: String,
        param: String,
        value: String,
        msg: String,
    },
}

/// Documentation of one parameter.
#[derive(Clone, Debug, Serialize)]
pub struct ParamInfo {
    pub name: &'static str,
    pub kind: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// Documentation of one registered policy.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyInfo {
    pub name: &'static str,
    pub level: &'static str,
    pub summary: &'static str,
    pub params: Vec<ParamInfo>,
}

impl PolicySpec {
    /// Parses a policy string with the one `name[key=value,...]` parser
    /// ([`cosched_model::spec::parse`]).
    pub fn parse(spec: &str) -> Result<Self, RegistryError> {
        let parsed = cosched_model::spec::parse(spec)?;
        Ok(Self {
            name: parsed.name,
            params: parsed.params.into_iter().collect(),
        })
    }

    /// Fails on any parameter not in `valid`.
    pub fn expect_only(&self, valid: &[&str]) -> Result<(), RegistryError> {
        for k in self.params.keys() {
            if !valid.contains(&k.as_str()) {
                let valid = if valid.is_empty() {
                    "(none)".to_string()
                } else {
                    valid.join(", ")
                };
                return Err(RegistryError::UnknownParam {
                    policy: self.name.clone(),
                    param: k.clone(),
                    valid,
                });
            }
        }
        Ok(())
    }

    /// Parses parameter `key` with `FromStr`, or returns `default` when absent.
    pub fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, RegistryError>
    where
        T::Err: std::fmt::Display,
    {
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e: T::Err| RegistryError::BadValue {
                policy: self.name.clone(),
                param: key.to_string(),
                value: v.clone(),
                msg: e.to_string(),
            }),
        }
    }
}

/// A registry entry's constructor of a `T`.
pub(crate) type Make<T> = fn(&PolicySpec) -> Result<T, RegistryError>;
/// A registry entry's constructor of a boxed policy.
type BuildFn<P> = Make<Box<P>>;
type Builder = BuildFn<dyn ClusterPolicy>;

/// Every registered cluster-level policy: (info, builder).
fn entries() -> Vec<(PolicyInfo, Builder)> {
    vec![
        (crate::fcfs::info(), crate::fcfs::build),
        (crate::easy::info(), crate::easy::build),
        (crate::conservative::info(), crate::conservative::build),
    ]
}

type NodeBuilder = BuildFn<dyn NodePolicy>;

/// Every registered node-level policy: (info, builder).
fn node_entries() -> Vec<(PolicyInfo, NodeBuilder)> {
    vec![
        (crate::node::nls::info(), crate::node::nls::build),
        (crate::node::block::info(), crate::node::block::build),
        (crate::node::dcs::info(), crate::node::dcs::build),
        (crate::node::sb::info(), crate::node::sb::build),
        (crate::node::pb::info(), crate::node::pb::build),
        (crate::node::cc::info(), crate::node::cc::build),
        (crate::node::hybrid::info(), crate::node::hybrid::build),
        (crate::node::ics::info(), crate::node::ics::build),
        (crate::node::fcs::info(), crate::node::fcs::build),
        (crate::node::yielding::info(), crate::node::yielding::build),
    ]
}

/// Documentation of every registered policy, by level (`cluster`, then `node`, then
/// `process`: the process-level cluster schemes of [`crate::process`]), each level in
/// registry order.
pub fn catalog() -> Vec<PolicyInfo> {
    entries()
        .into_iter()
        .map(|(i, _)| i)
        .chain(node_entries().into_iter().map(|(i, _)| i))
        .chain(crate::process::process_catalog())
        .collect()
}

/// Documentation of every registered job-level cluster policy, in registry order.
pub fn cluster_catalog() -> Vec<PolicyInfo> {
    entries().into_iter().map(|(i, _)| i).collect()
}

/// Documentation of every registered node-level policy, in registry order.
pub fn node_catalog() -> Vec<PolicyInfo> {
    node_entries().into_iter().map(|(i, _)| i).collect()
}

/// The names of `all`, comma separated, in registry order.
fn names<T>(all: &[(PolicyInfo, T)]) -> String {
    all.iter()
        .map(|(i, _)| i.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Finds `spec`'s policy among `all` (one level of the registry) and builds it; an
/// unknown name lists the valid ones.
pub(crate) fn lookup<T>(spec: &str, all: &[(PolicyInfo, Make<T>)]) -> Result<T, RegistryError> {
    let parsed = PolicySpec::parse(spec)?;
    match all.iter().find(|(i, _)| i.name == parsed.name) {
        Some((_, b)) => b(&parsed),
        None => Err(RegistryError::UnknownPolicy {
            name: parsed.name.clone(),
            valid: names(all),
        }),
    }
}

/// Builds the node-level policy named by `spec` (e.g. `"nls"`).
pub fn build_node(spec: &str) -> Result<Box<dyn NodePolicy>, RegistryError> {
    lookup(spec, &node_entries())
}

/// Builds the cluster-level policy named by `spec` (e.g. `"easy"`, `"fcfs"`).
pub fn build(spec: &str) -> Result<Box<dyn ClusterPolicy>, RegistryError> {
    lookup(spec, &entries())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_params() {
        // The grammar itself is tested with the parser (cosched_model::spec).
        let s = PolicySpec::parse(" easy[ reserve = 2 ,x=y] ").unwrap();
        assert_eq!(s.name, "easy");
        assert_eq!(s.params.get("reserve").map(String::as_str), Some("2"));
        assert_eq!(s.params.len(), 2);
        let e = build("gang[rows=3,,]").err().unwrap().to_string();
        assert_eq!(
            e,
            "policy: cannot parse \"gang[rows=3,,]\" at character 13: empty parameter (two commas in a row, \
             or a leading or trailing comma); expected name or name[key=value,...]"
        );
        assert!(build_node("sb[").is_err());
    }

    #[test]
    fn unknown_policy_lists_valid_ones() {
        let e = build("sjf").err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "unknown policy \"sjf\"; valid policies: {}",
                names(&entries())
            )
        );
        assert!(names(&entries()).starts_with("fcfs, easy, conservative"));
    }

    #[test]
    fn unknown_param_lists_valid_ones() {
        let e = build("fcfs[depth=3]").err().unwrap();
        assert!(
            e.to_string()
                .starts_with("policy fcfs: unknown parameter \"depth\""),
            "{e}"
        );
    }

    #[test]
    fn every_catalog_entry_builds_with_defaults() {
        for info in catalog() {
            let name = match info.level {
                "cluster" => build(info.name).unwrap().name(),
                "node" => build_node(info.name).unwrap().name(),
                "process" => {
                    crate::process::build_process(info.name).unwrap();
                    info.name.to_string()
                }
                other => panic!("{}: unknown level {other}", info.name),
            };
            assert!(name.starts_with(info.name));
        }
    }

    /// Every node policy declares in `ops()` exactly the gated ops it implements
    /// (an undeclared op would never be called).
    #[test]
    fn every_node_policy_declares_the_ops_it_implements() {
        use crate::node::fake::View;
        for info in node_catalog() {
            let mut p = build_node(info.name).unwrap();
            let v = View::new(&[(0, false, 1), (1, true, 0)]);
            let wrong = cosched_contract::node::undeclared_ops(p.as_mut(), &v, 0);
            assert!(
                wrong.is_empty(),
                "{}: (op, implemented) {wrong:?}",
                info.name
            );
        }
    }

    #[test]
    fn node_and_cluster_names_are_separate() {
        assert!(build_node("nls").is_ok());
        assert_eq!(
            build_node("easy").err().unwrap().to_string(),
            format!(
                "unknown policy \"easy\"; valid policies: {}",
                names(&node_entries())
            )
        );
        assert!(names(&node_entries())
            .starts_with("nls, block, dcs, sb, pb, cc, hybrid, ics, fcs, yield"));
        assert!(build("nls").is_err());
    }
}
