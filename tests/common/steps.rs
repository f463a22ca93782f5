//! Ordered steps sharing one expensive setup (a cluster with a node, an OCM fleet): the
//! harness of the node and fleet tiers (libtest-mimic, `harness = false`). Each step is a
//! named test; one whose prerequisite did not pass fails too, saying which (never a pass).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use libtest_mimic::Failed;

/// A step's future, borrowing its tier.
pub type Boxed<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// One step of tier `T`: its test name, the steps it needs, and what it does (a panic fails it).
pub struct Step<T: 'static> {
    pub name: &'static str,
    pub needs: &'static [&'static str],
    pub run: for<'a> fn(&'a T) -> Boxed<'a>,
}

/// `steps! { Tier; a needs []; b needs [a]; }` declares `pub static STEPS: &[Step<Tier>]`,
/// each step the async fn of its name taking `&Tier`.
#[macro_export]
macro_rules! steps {
    ($tier:ty; $($name:ident needs [$($need:ident),*];)*) => {
        pub static STEPS: &[$crate::common::steps::Step<$tier>] = &[$($crate::common::steps::Step {
            name: stringify!($name),
            needs: &[$(stringify!($need)),*],
            run: |tier| Box::pin($name(tier)),
        }),*];
    };
}

/// The steps that passed so far.
#[derive(Default)]
pub struct Passed(Mutex<Vec<&'static str>>);

impl Passed {
    /// Runs `step` on `tier` in `rt`, unless a step it needs did not pass.
    pub fn run<T>(
        &self,
        rt: &tokio::runtime::Runtime,
        tier: &T,
        step: &'static Step<T>,
    ) -> Result<(), Failed> {
        let passed = self.0.lock().expect("passed").clone();
        if let Some(missing) = step.needs.iter().find(|n| !passed.contains(n)) {
            return Err(format!("not run: it needs step {missing}, which did not pass").into());
        }
        rt.block_on((step.run)(tier));
        self.0.lock().expect("passed").push(step.name);
        Ok(())
    }
}
