//! The picker's state turned into what the view draws: the visible rows, the header's
//! counts and status, and why the list is empty when it is.

use super::index::SearchIndex;
use super::{IndexState, ListRows, Picker, view};

impl Picker {
    /// Everything the view draws, as plain data.
    pub(super) fn view_model(&self) -> view::Model<'_> {
        let end = (self.offset + self.list_height).min(self.row_count());
        let index = match &self.index {
            IndexState::Ready(index) => Some(&**index),
            _ => None,
        };
        let rows = (self.offset..end)
            .map(|row| view::Row {
                meta: self.row_meta(row),
                selected: row == self.selected,
            })
            .collect();
        let selected_meta = self.row_meta(self.selected);
        let preview = match self.selected_id() {
            None => view::PreviewState::Nothing,
            Some(id) => match self
                .previews
                .iter()
                .find(|(cached, _)| cached.as_str() == id)
            {
                Some((_, Ok(messages))) => view::PreviewState::Messages(messages),
                Some((_, Err(err))) => view::PreviewState::Failed(err),
                None => view::PreviewState::Loading,
            },
        };
        view::Model {
            project_dir: &self.project_dir,
            all_projects: self.all_projects,
            archived: self.archived,
            query: &self.query,
            now_ms: self.now_ms,
            rows,
            selected_meta,
            preview,
            status: self.status(index),
            empty: self.empty_reason(),
        }
    }

    /// The count or progress shown in the header.
    fn status(&self, index: Option<&SearchIndex>) -> view::Status {
        if self.searching() {
            return match (&self.index, index) {
                (IndexState::Failed(err), _) => view::Status::SearchFailed(err.clone()),
                (_, None) => view::Status::Indexing,
                (_, Some(_)) if self.search.shown != self.search.generation => {
                    view::Status::Searching(None)
                }
                (_, Some(_)) => {
                    let found = self.search.hits.len();
                    if self.search.done {
                        view::Status::Matches {
                            found,
                            elsewhere: self.search.elsewhere,
                        }
                    } else {
                        view::Status::Searching(Some(found))
                    }
                }
            };
        }
        match &self.list.rows {
            ListRows::Indexed(entries) => view::Status::Sessions {
                count: entries.len(),
                more: false,
            },
            ListRows::Pages { rows, next, .. } => view::Status::Sessions {
                count: rows.len(),
                more: next.is_some(),
            },
        }
    }

    /// Why the list is empty, when it is.
    fn empty_reason(&self) -> Option<view::Empty<'_>> {
        if self.row_count() > 0 {
            return None;
        }
        if self.searching() {
            return Some(match &self.index {
                IndexState::Failed(err) => view::Empty::SearchFailed(err),
                IndexState::Building => view::Empty::Indexing,
                IndexState::Ready(_) if self.search.shown != self.search.generation => {
                    view::Empty::Searching
                }
                IndexState::Ready(_) if !self.search.done => view::Empty::Searching,
                IndexState::Ready(_) => view::Empty::NoMatch {
                    elsewhere: if self.all_projects {
                        0
                    } else {
                        self.search.elsewhere
                    },
                },
            });
        }
        Some(match &self.list.rows {
            ListRows::Pages {
                error: Some(err), ..
            } => view::Empty::Failed(err),
            ListRows::Pages { loading: true, .. } => view::Empty::Loading,
            ListRows::Pages { next: Some(_), .. } => view::Empty::Loading,
            _ if self.stored == 0 => view::Empty::NoSessions,
            _ if !self.all_projects => view::Empty::NoneInProject,
            _ => view::Empty::NoneListed,
        })
    }
}
