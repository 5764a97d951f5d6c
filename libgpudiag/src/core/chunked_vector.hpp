// SPDX-License-Identifier: Apache-2.0
// ChunkedVector<T>: a sequence that grows by chunks that never move. A std::vector that doubles
// copies everything it holds and, past a few megabytes, touches every page of a fresh allocation
// each time: for the millions of records an analysis keeps from a long trace that was a tenth of
// the whole run (page faults) and half again its memory at the peak. Here growing costs one chunk.
#pragma once

#include <compare>
#include <cstddef>
#include <iterator>
#include <memory>
#include <vector>

namespace gpudiag::detail {

template <typename T, std::size_t kChunkBits = 14>
class ChunkedVector {
    static constexpr std::size_t kChunk = std::size_t{1} << kChunkBits;

public:
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

    T& operator[](std::size_t i) noexcept { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
    const T& operator[](std::size_t i) const noexcept {
        return chunks_[i >> kChunkBits][i & (kChunk - 1)];
    }
    T& back() noexcept { return (*this)[size_ - 1]; }

    void push_back(const T& value) {
        if ((size_ & (kChunk - 1)) == 0 && (size_ >> kChunkBits) == chunks_.size()) {
            chunks_.push_back(std::make_unique<T[]>(kChunk));
        }
        (*this)[size_] = value;
        ++size_;
    }
    void clear() noexcept {
        chunks_.clear();
        size_ = 0;
    }

    class const_iterator {
    public:
        using iterator_category = std::random_access_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T*;
        using reference = const T&;

        const_iterator() = default;
        const_iterator(const ChunkedVector* v, std::size_t i) : v_(v), i_(i) {}
        reference operator*() const { return (*v_)[i_]; }
        pointer operator->() const { return &(*v_)[i_]; }
        reference operator[](difference_type n) const {
            return (*v_)[static_cast<std::size_t>(static_cast<difference_type>(i_) + n)];
        }
        const_iterator& operator++() {
            ++i_;
            return *this;
        }
        const_iterator operator++(int) {
            const_iterator old = *this;
            ++i_;
            return old;
        }
        const_iterator& operator--() {
            --i_;
            return *this;
        }
        const_iterator operator--(int) {
            const_iterator old = *this;
            --i_;
            return old;
        }
        const_iterator& operator+=(difference_type n) {
            i_ = static_cast<std::size_t>(static_cast<difference_type>(i_) + n);
            return *this;
        }
        const_iterator& operator-=(difference_type n) { return *this += -n; }
        friend const_iterator operator+(const_iterator a, difference_type n) { return a += n; }
        friend const_iterator operator+(difference_type n, const_iterator a) { return a += n; }
        friend const_iterator operator-(const_iterator a, difference_type n) { return a -= n; }
        friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
            return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
        }
        friend bool operator==(const const_iterator& a, const const_iterator& b) {
            return a.i_ == b.i_;
        }
        friend auto operator<=>(const const_iterator& a, const const_iterator& b) {
            return a.i_ <=> b.i_;
        }

    private:
        const ChunkedVector* v_ = nullptr;
        std::size_t i_ = 0;
    };

    [[nodiscard]] const_iterator begin() const noexcept { return const_iterator(this, 0); }
    [[nodiscard]] const_iterator end() const noexcept { return const_iterator(this, size_); }

private:
    std::vector<std::unique_ptr<T[]>> chunks_;
    std::size_t size_ = 0;
};

}  // namespace gpudiag::detail
