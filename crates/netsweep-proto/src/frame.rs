//! Length-prefixed frames: a u32 big-endian body length, then the body.
//!
//! The length is checked against [`MAX_FRAME`] as soon as its four bytes arrive, before any
//! buffer for the body exists, so a hostile peer cannot make the decoder allocate.

use std::collections::VecDeque;

use crate::error::ProtoError;

/// Largest frame body accepted or sent: 1 MiB.
pub const MAX_FRAME: usize = 1_048_576;
/// Size of the length header in bytes.
pub const LEN_BYTES: usize = 4;

/// Prefixes `body` with its length; [`ProtoError::FrameTooLarge`] above [`MAX_FRAME`].
pub fn encode_frame(body: &[u8]) -> Result<Vec<u8>, ProtoError> {
    let len = check_len(body.len() as u64)?;
    let mut out = Vec::with_capacity(LEN_BYTES + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

fn check_len(size: u64) -> Result<u32, ProtoError> {
    match u32::try_from(size) {
        Ok(len) if size <= MAX_FRAME as u64 => Ok(len),
        _ => Err(ProtoError::FrameTooLarge {
            size,
            max: MAX_FRAME,
        }),
    }
}

/// Incremental frame decoder: [`push`](Self::push) byte chunks of any size, then
/// [`pop`](Self::pop) complete bodies in order.
///
/// After an error the decoder is dead: every later `push` returns the same error.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    header: [u8; LEN_BYTES],
    header_len: usize,
    /// The body in progress and its announced length.
    body: Option<(Vec<u8>, usize)>,
    ready: VecDeque<Vec<u8>>,
    error: Option<ProtoError>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds received bytes; complete bodies become available to [`pop`](Self::pop).
    ///
    /// Bodies completed before an error stay available.
    pub fn push(&mut self, mut data: &[u8]) -> Result<(), ProtoError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        while !data.is_empty() {
            if let Some((body, want)) = &mut self.body {
                let take = (*want - body.len()).min(data.len());
                body.extend_from_slice(&data[..take]);
                data = &data[take..];
                if body.len() == *want {
                    let (body, _) = self.body.take().unwrap_or_default();
                    self.ready.push_back(body);
                }
                continue;
            }
            let take = (LEN_BYTES - self.header_len).min(data.len());
            self.header[self.header_len..self.header_len + take].copy_from_slice(&data[..take]);
            self.header_len += take;
            data = &data[take..];
            if self.header_len == LEN_BYTES {
                self.header_len = 0;
                let size = u32::from_be_bytes(self.header);
                if let Err(err) = check_len(u64::from(size)) {
                    self.error = Some(err.clone());
                    return Err(err);
                }
                let want = size as usize;
                if want == 0 {
                    self.ready.push_back(Vec::new());
                } else {
                    // Only now, with the length known to be within the cap, allocate.
                    self.body = Some((Vec::with_capacity(want), want));
                }
            }
        }
        Ok(())
    }

    /// The next complete body, if any.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }

    /// `(got, expected)` for a frame part in progress: the length header (expected 4), or
    /// the body (expected its announced length). `None` between frames.
    pub fn partial(&self) -> Option<(usize, usize)> {
        match &self.body {
            Some((body, want)) => Some((body.len(), *want)),
            None if self.header_len > 0 => Some((self.header_len, LEN_BYTES)),
            None => None,
        }
    }

    /// Whether some bytes of an incomplete frame are held.
    pub fn has_partial(&self) -> bool {
        self.partial().is_some()
    }

    /// To call at end of input: [`ProtoError::TruncatedFrame`] if a frame was cut short.
    pub fn finish(&self) -> Result<(), ProtoError> {
        match self.partial() {
            Some((got, expected)) => Err(ProtoError::TruncatedFrame { got, expected }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_alloc::LARGEST;
    use std::sync::atomic::Ordering;

    #[test]
    fn round_trip_several_frames_in_one_chunk() {
        let mut wire = encode_frame(b"one").unwrap();
        wire.extend(encode_frame(b"").unwrap());
        wire.extend(encode_frame(b"three").unwrap());
        assert_eq!(&wire[..7], &[0, 0, 0, 3, b'o', b'n', b'e']);
        let mut dec = FrameDecoder::new();
        dec.push(&wire).unwrap();
        assert_eq!(dec.pop(), Some(b"one".to_vec()));
        assert_eq!(dec.pop(), Some(Vec::new()));
        assert_eq!(dec.pop(), Some(b"three".to_vec()));
        assert_eq!(dec.pop(), None);
        assert!(!dec.has_partial());
        assert_eq!(dec.finish(), Ok(()));
    }

    #[test]
    fn frame_split_byte_by_byte_decodes() {
        let body = br#"{"type":"bye"}"#;
        let wire = encode_frame(body).unwrap();
        let mut dec = FrameDecoder::new();
        for (i, b) in wire.iter().enumerate() {
            assert_eq!(dec.pop(), None, "early body at byte {i}");
            dec.push(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(dec.pop(), Some(body.to_vec()));
    }

    #[test]
    fn max_size_frame_accepted_and_one_more_rejected() {
        let body = vec![7u8; MAX_FRAME];
        let wire = encode_frame(&body).unwrap();
        let mut dec = FrameDecoder::new();
        dec.push(&wire).unwrap();
        assert_eq!(dec.pop().map(|b| b.len()), Some(MAX_FRAME));

        let too_big = vec![0u8; MAX_FRAME + 1];
        assert_eq!(
            encode_frame(&too_big),
            Err(ProtoError::FrameTooLarge {
                size: MAX_FRAME as u64 + 1,
                max: MAX_FRAME
            })
        );
    }

    #[test]
    fn oversize_header_rejected_without_allocating() {
        let mut dec = FrameDecoder::new();
        let err = dec.push(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).unwrap_err();
        assert_eq!(
            err,
            ProtoError::FrameTooLarge {
                size: 0xffff_ffff,
                max: MAX_FRAME
            }
        );
        assert!(err
            .to_string()
            .contains("4294967295 bytes exceeds the 1048576-byte cap"));
        // No allocation anywhere in this test binary came near the claimed 4 GiB.
        assert!(LARGEST.load(Ordering::Relaxed) < 1 << 30);
        assert!(!dec.has_partial());
        // The decoder stays dead.
        assert_eq!(dec.push(b"more"), Err(err));
        assert_eq!(dec.pop(), None);
    }

    #[test]
    fn truncated_frame_reports_counts() {
        let wire = encode_frame(b"0123456789").unwrap();
        let mut dec = FrameDecoder::new();
        dec.push(&wire[..LEN_BYTES + 3]).unwrap();
        assert_eq!(dec.partial(), Some((3, 10)));
        let err = dec.finish().unwrap_err();
        assert_eq!(
            err,
            ProtoError::TruncatedFrame {
                got: 3,
                expected: 10
            }
        );
        assert!(err
            .to_string()
            .starts_with("truncated frame: got 3 of 10 bytes"));

        let mut header_only = FrameDecoder::new();
        header_only.push(&[0, 0]).unwrap();
        assert_eq!(
            header_only.finish(),
            Err(ProtoError::TruncatedFrame {
                got: 2,
                expected: LEN_BYTES
            })
        );
    }
}
