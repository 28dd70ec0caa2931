//! How the owner's socket carries messages: each frame is a 4-byte big-endian length and that
//! many bytes of one JSON value. A frame that carries a long text (a paste sent from a second
//! terminal) sends it raw after the JSON instead of escaped inside it: the length's top bit
//! says so, and a 4-byte length and the text's UTF-8 bytes follow. The text is then written
//! from where it lies and read straight into the string the frame keeps, so megabytes cross
//! the socket without an encoded copy on either side.

use super::MAX_FRAME;
use crate::session::InputText;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Set in a frame's length when a raw text follows its JSON.
const ATTACHED: u32 = 1 << 31;
/// Texts longer than this travel raw after their frame.
pub(super) const ATTACH_OVER: usize = 64 * 1024;

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("a frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("a frame is not understood: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("a frame's attached text {0}")]
    Attachment(&'static str),
}

/// A message that travels in frames.
pub trait Frame: Serialize + Sized {
    /// What is sent instead of this frame, which encoded to `len` bytes, over the limit:
    /// it answers (or ends) the same request, saying why.
    fn instead_of_oversized(&self, len: usize) -> Self;

    /// Whether a frame of this kind may come with a text after it: one that may not is
    /// refused before the text is read.
    const HOLDS_TEXT: bool = false;

    /// A text over [`ATTACH_OVER`] bytes the frame carries, taken out (its place left
    /// empty) to travel raw after the frame.
    fn take_text(&mut self) -> Option<InputText> {
        None
    }

    /// Puts back the text that travelled after the frame; false when the frame has no place
    /// for one.
    fn put_text(&mut self, _text: InputText) -> bool {
        false
    }
}

/// A frame ready to write: its length and JSON, and the text that follows them raw.
struct Encoded {
    head: Vec<u8>,
    text: Option<InputText>,
}

/// Encodes `frame` (taking out its long text), refusing it when it would take more than
/// `limit` bytes.
fn encode<T: Frame>(frame: &mut T, limit: usize) -> Result<Encoded, WireError> {
    let text = frame.take_text();
    let mut head = vec![0u8; 4];
    serde_json::to_writer(&mut head, &*frame)?;
    let json = head.len() - 4;
    let len = json + text.as_ref().map_or(0, |text| 4 + text.len());
    if len > limit {
        return Err(WireError::TooLarge(len));
    }
    let mut prefix = u32::try_from(json).map_err(|_| WireError::TooLarge(len))?;
    if let Some(text) = &text {
        prefix |= ATTACHED;
        let bytes = u32::try_from(text.len()).map_err(|_| WireError::TooLarge(len))?;
        head.extend_from_slice(&bytes.to_be_bytes());
    }
    head[..4].copy_from_slice(&prefix.to_be_bytes());
    Ok(Encoded { head, text })
}

async fn write_encoded<W: AsyncWrite + Unpin>(
    writer: &mut W,
    encoded: Encoded,
) -> Result<(), WireError> {
    writer.write_all(&encoded.head).await?;
    if let Some(text) = encoded.text {
        writer.write_all(text.as_bytes()).await?;
    }
    Ok(())
}

/// Writes `frame` as one frame (and its long text after it).
pub async fn write_frame<W, T>(writer: &mut W, mut frame: T) -> Result<(), WireError>
where
    W: AsyncWrite + Unpin,
    T: Frame,
{
    let encoded = encode(&mut frame, MAX_FRAME)?;
    write_encoded(writer, encoded).await
}

/// Writes the frames `outbox` receives until it closes or the peer goes, flushing once
/// for as many as were waiting together. A frame over the limit is replaced by what it
/// says to send instead, so its request is answered and the connection goes on.
pub async fn write_batches<W, T>(writer: W, outbox: tokio::sync::mpsc::Receiver<T>)
where
    W: AsyncWrite + Unpin,
    T: Frame,
{
    write_batches_within(writer, outbox, MAX_FRAME).await;
}

pub(super) async fn write_batches_within<W, T>(
    mut writer: W,
    mut outbox: tokio::sync::mpsc::Receiver<T>,
    limit: usize,
) where
    W: AsyncWrite + Unpin,
    T: Frame,
{
    let write = async |writer: &mut W, mut frame: T| {
        let encoded = match encode(&mut frame, limit) {
            Err(WireError::TooLarge(len)) => {
                tracing::warn!(
                    bytes = len,
                    "a frame was too large to send; its request is refused"
                );
                encode(&mut frame.instead_of_oversized(len), limit)
            }
            other => other,
        }?;
        write_encoded(writer, encoded).await
    };
    while let Some(frame) = outbox.recv().await {
        if write(&mut writer, frame).await.is_err() {
            return;
        }
        while let Ok(frame) = outbox.try_recv() {
            if write(&mut writer, frame).await.is_err() {
                return;
            }
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

/// Reads one frame (and the text attached to it); `None` when the peer closed the
/// connection between frames.
pub async fn read_frame<R, T>(reader: &mut R) -> Result<Option<T>, WireError>
where
    R: AsyncRead + Unpin,
    T: Frame + DeserializeOwned,
{
    let prefix = match read_length(reader).await {
        Ok(prefix) => prefix,
        Err(WireError::Io(err)) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Ok(None);
        }
        Err(err) => return Err(err),
    };
    let len = (prefix & !ATTACHED) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    let mut frame: T = serde_json::from_slice(&body)?;
    drop(body);
    if prefix & ATTACHED != 0 {
        if !T::HOLDS_TEXT {
            return Err(WireError::Attachment(
                "came with a frame that holds no text",
            ));
        }
        // The limit is the frame's with its text, as the writer counts it.
        let attached = read_length(reader).await? as usize;
        let whole = len + 4 + attached;
        if whole > MAX_FRAME {
            return Err(WireError::TooLarge(whole));
        }
        let mut raw = vec![0u8; attached];
        reader.read_exact(&mut raw).await?;
        let text = String::from_utf8(raw).map_err(|_| WireError::Attachment("is not UTF-8"))?;
        if !frame.put_text(text.into()) {
            return Err(WireError::Attachment(
                "came with a frame that holds no text",
            ));
        }
    }
    Ok(Some(frame))
}

async fn read_length<R: AsyncRead + Unpin>(reader: &mut R) -> Result<u32, WireError> {
    let mut prefix = [0u8; 4];
    reader.read_exact(&mut prefix).await?;
    Ok(u32::from_be_bytes(prefix))
}

#[cfg(test)]
mod tests;
