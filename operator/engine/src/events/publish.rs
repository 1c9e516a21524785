//! The publishing side: an observer of the executor and a tap on the run's provenance log that
//! turn what happens into stream events. Both only queue (see [`RunEvents::publish`]), so a
//! slow or absent backend never slows the run; the pure reducer knows nothing about them.

use std::sync::{Arc, Mutex};

use super::{EventBody, EventTracker, RunEvent, RunEvents, RunRef, now_rfc3339};
use crate::llm::router::{CallRecord, RecordTap, SourceRecord};
use tokio::sync::watch;

use crate::research::machine::reducer::Event;
use crate::research::machine::state::RunState;
use crate::research::shell::executor::{self, Control, Engine, RunObserver};

/// Publishes one run's events.
pub struct StreamPublisher {
    events: Arc<dyn RunEvents>,
    run: RunRef,
    tracker: Mutex<EventTracker>,
}

impl StreamPublisher {
    /// A publisher of `run`'s events to `events`.
    pub fn new(events: Arc<dyn RunEvents>, run: RunRef) -> Self {
        Self {
            events,
            run,
            tracker: Mutex::new(EventTracker::new()),
        }
    }

    /// The run it publishes for.
    pub fn run(&self) -> &RunRef {
        &self.run
    }

    /// Publishes the run's final event and marks its stream finished.
    pub fn finish(&self, state: &RunState) {
        let event = RunEvent::from_body(&self.run, &EventBody::finished(state), &now_rfc3339());
        self.events.publish(&self.run, event);
        self.events.finish(&self.run);
    }
}

impl RunObserver for StreamPublisher {
    fn on_change(&self, state: &RunState, event: &Event) {
        let bodies = self
            .tracker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .derive(state, event);
        if bodies.is_empty() {
            return;
        }
        let time = now_rfc3339();
        for body in &bodies {
            self.events
                .publish(&self.run, RunEvent::from_body(&self.run, body, &time));
        }
    }
}

impl RecordTap for StreamPublisher {
    fn on_call(&self, record: &CallRecord) {
        if let Some(event) = RunEvent::from_record(&self.run, record) {
            self.events.publish(&self.run, event);
        }
    }

    fn on_source(&self, record: &SourceRecord) {
        if let Some(event) = RunEvent::from_record(&self.run, record) {
            self.events.publish(&self.run, event);
        }
    }
}

/// Drives a run (see [`executor::run`]) with its events published by `publisher`: model calls,
/// searches and reads as they are logged, engine events after `observer` has seen them, and the
/// final event once the run ends.
pub async fn run_published(
    engine: Arc<Engine>,
    state: RunState,
    observer: Arc<dyn RunObserver>,
    control: watch::Receiver<Control>,
    publisher: Arc<StreamPublisher>,
) -> RunState {
    engine.spend.set_tap(publisher.clone());
    let observers = Arc::new(Observers(vec![observer, publisher.clone()]));
    let state = executor::run(engine, state, observers, control).await;
    publisher.finish(&state);
    state
}

/// Several observers as one, called in order.
pub struct Observers(pub Vec<Arc<dyn RunObserver>>);

impl RunObserver for Observers {
    fn on_change(&self, state: &RunState, event: &Event) {
        for observer in &self.0 {
            observer.on_change(state, event);
        }
    }
}
