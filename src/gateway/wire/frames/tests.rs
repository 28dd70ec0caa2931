use super::super::{Call, Hello, MAX_FRAME, Reply, Request, ToClient};
use super::*;
use crate::domain::SessionId;
use crate::session::UserInput;
use std::path::PathBuf;

#[tokio::test]
async fn frames_round_trip_and_a_closed_peer_reads_as_none() {
    let (mut a, mut b) = tokio::io::duplex(1 << 16);
    let request = Request {
        id: 7,
        call: Call::Tail {
            id: SessionId::generate(),
            n: 3,
        },
    };
    write_frame(&mut a, request).await.unwrap();
    write_frame(&mut a, Hello::ours()).await.unwrap();
    drop(a);
    let read: Request = read_frame(&mut b).await.unwrap().unwrap();
    assert_eq!(read.id, 7);
    assert!(matches!(read.call, Call::Tail { n: 3, .. }));
    let hello: Hello = read_frame(&mut b).await.unwrap().unwrap();
    assert!(hello.matches(&Hello::ours()));
    assert!(read_frame::<_, Hello>(&mut b).await.unwrap().is_none());
}

#[tokio::test]
async fn an_oversized_or_garbled_frame_is_refused() {
    let (mut a, mut b) = tokio::io::duplex(1 << 16);
    a.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    assert!(matches!(
        read_frame::<_, Hello>(&mut b).await,
        Err(WireError::TooLarge(_))
    ));
    let (mut a, mut b) = tokio::io::duplex(1 << 16);
    a.write_all(&3u32.to_be_bytes()).await.unwrap();
    a.write_all(b"{x}").await.unwrap();
    assert!(matches!(
        read_frame::<_, Hello>(&mut b).await,
        Err(WireError::Malformed(_))
    ));
}

#[tokio::test]
async fn a_frame_too_large_is_answered_in_its_place_and_the_connection_goes_on() {
    let (a, mut b) = tokio::io::duplex(1 << 16);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let writing = tokio::spawn(write_batches_within(a, rx, 1000));
    let big = Reply::Files {
        files: vec!["x".repeat(2000)],
    };
    tx.send(ToClient::Reply {
        id: 1,
        result: Ok(big),
    })
    .await
    .unwrap();
    tx.send(ToClient::Reply {
        id: 2,
        result: Ok(Reply::Done),
    })
    .await
    .unwrap();
    drop(tx);
    let first: ToClient = read_frame(&mut b).await.unwrap().unwrap();
    let ToClient::Reply {
        id: 1,
        result: Err(why),
    } = first
    else {
        panic!("not the refusal: {first:?}");
    };
    assert!(why.contains("MiB") && why.contains("quit"), "{why}");
    let second: ToClient = read_frame(&mut b).await.unwrap().unwrap();
    assert!(matches!(
        second,
        ToClient::Reply {
            id: 2,
            result: Ok(Reply::Done)
        }
    ));
    writing.await.unwrap();

    // A request too large goes as one the owner refuses, under the same id.
    let (a, mut b) = tokio::io::duplex(1 << 16);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let writing = tokio::spawn(write_batches_within(a, rx, 1000));
    let call = Call::Shell {
        cwd: PathBuf::from("/"),
        command: "y".repeat(2000),
    };
    tx.send(Request { id: 9, call }).await.unwrap();
    drop(tx);
    let sent: Request = read_frame(&mut b).await.unwrap().unwrap();
    assert_eq!(sent.id, 9);
    assert!(matches!(sent.call, Call::Oversized { .. }), "{sent:?}");
    writing.await.unwrap();
}

fn sent(text: String) -> Request {
    Request {
        id: 3,
        call: Call::SendTo {
            id: SessionId::generate(),
            input: UserInput::local(text),
        },
    }
}

/// The bytes `frame` takes on the wire, and what reading them back gives.
async fn through_the_wire(frame: Request) -> (usize, Request) {
    let (a, mut b) = tokio::io::duplex(1 << 16);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let writing = tokio::spawn(write_batches(a, rx));
    tx.send(frame).await.unwrap();
    drop(tx);
    let mut bytes = Vec::new();
    b.read_to_end(&mut bytes).await.unwrap();
    writing.await.unwrap();
    let read = read_frame(&mut bytes.as_slice()).await.unwrap().unwrap();
    (bytes.len(), read)
}

#[tokio::test]
async fn a_long_text_travels_raw_after_its_frame_and_comes_back_whole() {
    // Lines, quotes, backslashes and wide characters: escaped in JSON, each would grow.
    let line = "a \"quoted\" C:\\path\tand 漢字\n";
    let long = line.repeat(ATTACH_OVER / line.len() + 100);
    let (bytes, read) = through_the_wire(sent(long.clone())).await;
    let Call::SendTo { input, .. } = read.call else {
        panic!("not the send: {:?}", read.call);
    };
    assert_eq!(&*input.text, long);
    assert!(
        bytes < long.len() + 512,
        "{bytes} bytes on the wire for a text of {}",
        long.len()
    );
    // A short text stays inside the frame's JSON.
    let short = line.repeat(10);
    let (bytes, read) = through_the_wire(sent(short.clone())).await;
    let Call::SendTo { input, .. } = read.call else {
        panic!("not the send: {:?}", read.call);
    };
    assert_eq!(&*input.text, short);
    assert!(
        bytes > short.len() + 10 * 4,
        "{bytes}: not escaped in JSON?"
    );
}

#[tokio::test]
async fn an_attached_text_that_is_not_utf8_or_has_no_place_is_refused() {
    let frame = |json: &[u8], raw: &[u8]| {
        let mut bytes = ((json.len() as u32) | ATTACHED).to_be_bytes().to_vec();
        bytes.extend_from_slice(json);
        bytes.extend_from_slice(&(raw.len() as u32).to_be_bytes());
        bytes.extend_from_slice(raw);
        bytes
    };
    let mut request = sent(String::new());
    let json = serde_json::to_vec(&request).unwrap();
    let bytes = frame(&json, &[0xff, 0xfe]);
    let read = read_frame::<_, Request>(&mut bytes.as_slice()).await;
    assert!(
        matches!(read, Err(WireError::Attachment(why)) if why.contains("UTF-8")),
        "{read:?}"
    );
    let bytes = frame(&json, "fine".as_bytes());
    let read = read_frame::<_, Request>(&mut bytes.as_slice())
        .await
        .unwrap();
    let Some(Request {
        call: Call::SendTo { input, .. },
        ..
    }) = read
    else {
        panic!("not the send: {read:?}");
    };
    assert_eq!(&*input.text, "fine");
    request.call = Call::Tail {
        id: SessionId::generate(),
        n: 1,
    };
    let json = serde_json::to_vec(&request).unwrap();
    let bytes = frame(&json, "stray".as_bytes());
    let read = read_frame::<_, Request>(&mut bytes.as_slice()).await;
    assert!(matches!(read, Err(WireError::Attachment(_))), "{read:?}");
}

#[tokio::test]
async fn a_send_too_large_with_its_text_is_refused_under_its_id() {
    let (a, mut b) = tokio::io::duplex(1 << 16);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let limit = ATTACH_OVER * 2;
    let writing = tokio::spawn(write_batches_within(a, rx, limit));
    tx.send(sent("y".repeat(limit))).await.unwrap();
    drop(tx);
    let read: Request = read_frame(&mut b).await.unwrap().unwrap();
    assert_eq!(read.id, 3);
    assert!(matches!(read.call, Call::Oversized { .. }), "{read:?}");
    writing.await.unwrap();
}

#[tokio::test]
async fn an_attachment_is_refused_before_it_is_read_when_it_has_no_place_or_is_too_large() {
    // Only the lengths are sent: a refusal must not wait for (or allocate) the text.
    let head = |json: &[u8], attached: u32| {
        let mut bytes = ((json.len() as u32) | ATTACHED).to_be_bytes().to_vec();
        bytes.extend_from_slice(json);
        bytes.extend_from_slice(&attached.to_be_bytes());
        bytes
    };
    let hello = serde_json::to_vec(&Hello::ours()).unwrap();
    let bytes = head(&hello, 16);
    let read = read_frame::<_, Hello>(&mut bytes.as_slice()).await;
    assert!(matches!(read, Err(WireError::Attachment(_))), "{read:?}");
    let send = serde_json::to_vec(&sent(String::new())).unwrap();
    let over = (MAX_FRAME - send.len() - 4 + 1) as u32;
    let bytes = head(&send, over);
    let read = read_frame::<_, Request>(&mut bytes.as_slice()).await;
    assert!(
        matches!(read, Err(WireError::TooLarge(len)) if len == MAX_FRAME + 1),
        "{read:?}"
    );
}
