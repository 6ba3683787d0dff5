package pattern

import "testing"

func BenchmarkVerify(b *testing.B) {
	p := make([]byte, 1<<20)
	Fill(1, p, 0)
	b.SetBytes(int64(len(p)))
	for i := 0; i < b.N; i++ {
		if err := Verify(1, p, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFill(b *testing.B) {
	p := make([]byte, 1<<20)
	b.SetBytes(int64(len(p)))
	for i := 0; i < b.N; i++ {
		Fill(1, p, int64(i)<<20)
	}
}
